//! A trained or trainable model: any of the project's flows behind one type,
//! and the architecture choices that build one.

use super::FlowError;
use super::{
    ConvDesign, CouplingFlow, CouplingSpec, ElementwiseFlow, Flow, LatticeFlow, LatticeSpec,
    RadialConditioner, RadialFlow, RadialSpec,
};
use crate::bijection::{Family, Stack};
use crate::real::Real;
use crate::rng::Rng;

/// The architectures offered by the CLI and the app.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FlowKind {
    /// Radial flow with one scalar stack for every direction.
    Radial,
    /// Angle-dependent radial flow (Fourier conditioner, 2D).
    RadialFourier,
    /// Coupling flow with checker masks and a ResNet conditioner.
    Coupling,
    /// One stack on every coordinate (the 1D flow).
    Elementwise,
    /// Coupling flow on an L x L lattice field: checkerboard masks and a
    /// convolutional conditioner (phi^4).
    Lattice,
}

impl FlowKind {
    pub const ALL: [FlowKind; 5] = [
        FlowKind::Radial,
        FlowKind::RadialFourier,
        FlowKind::Coupling,
        FlowKind::Elementwise,
        FlowKind::Lattice,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            FlowKind::Radial => "radial",
            FlowKind::RadialFourier => "radial-fourier",
            FlowKind::Coupling => "coupling",
            FlowKind::Elementwise => "elementwise",
            FlowKind::Lattice => "lattice",
        }
    }

    pub fn parse(name: &str) -> Result<FlowKind, FlowError> {
        FlowKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == name)
            .ok_or_else(|| FlowError::UnknownKind(name.to_string()))
    }
}

/// Architecture and initialization choices.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowConfig {
    pub kind: FlowKind,
    pub family: Family,
    /// Copies of the family in each scalar stack.
    pub stack: usize,
    /// Coupling layers, conditioner width and residual depth.
    pub layers: usize,
    pub width: usize,
    pub depth: usize,
    /// Fourier order of the angle-dependent radial flow.
    pub fourier_order: usize,
    /// Radial centre (N(0, 1) when absent).
    pub center: Option<Vec<f64>>,
    /// Radial log-scales (N(0, 0.1^2) when absent).
    pub log_scale: Option<Vec<f64>>,
    /// Lattice flows: the Z2-equivariant design (see [`LatticeSpec::z2`]).
    pub z2: bool,
    /// Lattice flows: the conditioner's kernel, activation, channels and head.
    pub conv: ConvDesign,
    /// A map applied before the stack in the sampling direction (a composite
    /// site map such as affine then cubic rational).
    pub first: Option<Family>,
}

impl FlowConfig {
    /// Whether the flow's centre stays fixed while training: the
    /// Z2-equivariant radial flow, centred at 0 (only the CPU trainer freezes
    /// parameters).
    pub fn fixed_centre(&self) -> bool {
        self.z2 && self.kind == FlowKind::Radial
    }

    /// The paper's defaults for each architecture: radial flows use a 64-stack,
    /// coupling flows one scalar layer per element, 8 layers of width 128;
    /// lattice flows the phi^4 designs' 8 layers of 8 channels, one residual
    /// block and one map a site (a 64-stack of sinh maps on every site
    /// overflowed at the start).
    pub fn defaults(kind: FlowKind) -> Self {
        let lattice = kind == FlowKind::Lattice;
        Self {
            kind,
            family: Family::Cubic,
            stack: if kind == FlowKind::Coupling || lattice {
                1
            } else {
                64
            },
            layers: 8,
            width: if lattice { 8 } else { 128 },
            depth: if lattice { 1 } else { 2 },
            fourier_order: 3,
            center: None,
            log_scale: None,
            z2: false,
            conv: ConvDesign::default(),
            first: None,
        }
    }

    /// The scalar stack of each site: `first` (if any), then `stack` copies of the family.
    pub fn site_stack(&self) -> Stack {
        let copies = std::iter::repeat_n(self.family, self.stack);
        Stack::mixed(self.first.into_iter().chain(copies).collect())
    }

    /// Builds and initializes the flow for data of dimension `dim`.
    pub fn build<T: Real>(&self, dim: usize, rng: &mut Rng) -> Result<FlowModel<T>, FlowError> {
        if !(1..=crate::bijection::stack::MAX_STACK).contains(&self.stack) {
            return Err(FlowError::StackSize {
                max: crate::bijection::stack::MAX_STACK,
            });
        }
        let stack = self.site_stack();
        Ok(match self.kind {
            FlowKind::Radial | FlowKind::RadialFourier => {
                let conditioner = if self.kind == FlowKind::Radial {
                    RadialConditioner::Direct
                } else {
                    RadialConditioner::Fourier {
                        order: self.fourier_order,
                    }
                };
                let spec = RadialSpec {
                    dim,
                    stack,
                    conditioner,
                };
                FlowModel::Radial(RadialFlow::init(
                    spec,
                    self.center.as_deref(),
                    self.log_scale.as_deref(),
                    rng,
                )?)
            }
            FlowKind::Coupling => {
                let spec = CouplingSpec {
                    dim,
                    layers: self.layers,
                    width: self.width,
                    depth: self.depth,
                    stack,
                };
                FlowModel::Coupling(CouplingFlow::init(spec, rng)?)
            }
            FlowKind::Elementwise => {
                FlowModel::Elementwise(ElementwiseFlow::init(dim, stack, rng)?)
            }
            FlowKind::Lattice => {
                let size = (dim as f64).sqrt().round() as usize;
                if size * size != dim {
                    return Err(FlowError::NotSquare(dim));
                }
                let spec = LatticeSpec {
                    size,
                    layers: self.layers,
                    width: self.width,
                    depth: self.depth,
                    stack,
                    z2: self.z2,
                    conv: self.conv.clone(),
                };
                FlowModel::Lattice(LatticeFlow::init(spec, rng)?)
            }
        })
    }
}

/// Any flow of the project.
#[derive(Clone, Debug)]
pub enum FlowModel<T> {
    Radial(RadialFlow<T>),
    Coupling(CouplingFlow<T>),
    Elementwise(ElementwiseFlow<T>),
    Lattice(LatticeFlow<T>),
}

impl<T: Real> FlowModel<T> {
    pub fn as_flow(&self) -> &dyn Flow<T> {
        match self {
            FlowModel::Radial(f) => f,
            FlowModel::Coupling(f) => f,
            FlowModel::Elementwise(f) => f,
            FlowModel::Lattice(f) => f,
        }
    }

    pub fn as_flow_mut(&mut self) -> &mut dyn Flow<T> {
        match self {
            FlowModel::Radial(f) => f,
            FlowModel::Coupling(f) => f,
            FlowModel::Elementwise(f) => f,
            FlowModel::Lattice(f) => f,
        }
    }

    /// The same structure with the parameters `params` (in any precision).
    pub fn with_params<U: Real>(&self, params: Vec<U>) -> Result<FlowModel<U>, FlowError> {
        Ok(match self {
            FlowModel::Radial(f) => {
                FlowModel::Radial(RadialFlow::from_params(f.spec.clone(), params)?)
            }
            FlowModel::Coupling(f) => {
                FlowModel::Coupling(CouplingFlow::from_params(f.spec.clone(), params)?)
            }
            FlowModel::Elementwise(f) => FlowModel::Elementwise(ElementwiseFlow::from_params(
                f.dim,
                f.stack.clone(),
                params,
            )?),
            FlowModel::Lattice(f) => {
                FlowModel::Lattice(LatticeFlow::from_params(f.spec.clone(), params)?)
            }
        })
    }

    /// Whether `other` is the same kind of flow with the same structure (it
    /// may differ in its parameters).
    pub fn same_structure<U: Real>(&self, other: &FlowModel<U>) -> bool {
        match (self, other) {
            (FlowModel::Radial(a), FlowModel::Radial(b)) => a.spec == b.spec,
            (FlowModel::Coupling(a), FlowModel::Coupling(b)) => a.spec == b.spec,
            (FlowModel::Elementwise(a), FlowModel::Elementwise(b)) => {
                a.dim == b.dim && a.stack == b.stack
            }
            (FlowModel::Lattice(a), FlowModel::Lattice(b)) => a.spec == b.spec,
            _ => false,
        }
    }

    /// How many maps the flow composes, in the sampling direction: a radial
    /// or element-wise flow's scalar maps, a coupling or lattice flow's layers.
    pub fn n_maps(&self) -> usize {
        match self {
            FlowModel::Radial(f) => f.spec.stack.len(),
            FlowModel::Coupling(f) => f.spec.layers,
            FlowModel::Elementwise(f) => f.stack.len(),
            FlowModel::Lattice(f) => f.spec.layers,
        }
    }

    /// The flow of its first `k` maps alone (`1 <= k <= n_maps`), with their
    /// trained parameters: what the data look like part of the way through.
    /// `None` for `k = 0` (no map: the latent space itself) or beyond the
    /// flow. A radial flow keeps its centre and scales and composes the
    /// first `k` maps of its stack (the angle-dependent one the matching
    /// columns of its weights).
    pub fn prefix(&self, k: usize) -> Option<FlowModel<T>> {
        if k == 0 || k > self.n_maps() {
            return None;
        }
        let params = self.as_flow().params();
        let model = match self {
            FlowModel::Radial(f) => {
                let stack = Stack::mixed(f.spec.stack.layers()[..k].to_vec());
                let (d, kept) = (f.spec.dim, stack.n_raw());
                let mut p = params[..2 * d].to_vec();
                match f.spec.conditioner {
                    RadialConditioner::Direct => p.extend_from_slice(&params[2 * d..][..kept]),
                    RadialConditioner::Fourier { .. } => {
                        let all = f.spec.stack.n_raw();
                        for row in params[2 * d..].chunks(all) {
                            p.extend_from_slice(&row[..kept]);
                        }
                    }
                }
                let spec = RadialSpec {
                    stack,
                    ..f.spec.clone()
                };
                FlowModel::Radial(RadialFlow::from_params(spec, p).ok()?)
            }
            FlowModel::Coupling(f) => {
                let spec = CouplingSpec {
                    layers: k,
                    ..f.spec.clone()
                };
                let p = params[..f.spec.layer_offset(k)].to_vec();
                FlowModel::Coupling(CouplingFlow::from_params(spec, p).ok()?)
            }
            FlowModel::Elementwise(f) => {
                let stack = Stack::mixed(f.stack.layers()[..k].to_vec());
                let p = params[..stack.n_raw()].to_vec();
                FlowModel::Elementwise(ElementwiseFlow::from_params(f.dim, stack, p).ok()?)
            }
            FlowModel::Lattice(f) => {
                let spec = LatticeSpec {
                    layers: k,
                    ..f.spec.clone()
                };
                let p = params[..k * f.spec.conv().n_params()].to_vec();
                FlowModel::Lattice(LatticeFlow::from_params(spec, p).ok()?)
            }
        };
        Some(model)
    }

    /// The same model in another precision.
    pub fn cast<U: Real>(&self) -> FlowModel<U> {
        let params = self.as_flow().params().iter();
        let converted: Vec<U> = params.map(|v| U::from_f64(v.to_f64())).collect();
        match self.with_params(converted) {
            Ok(model) => model,
            Err(e) => unreachable!("same structure, same parameter count: {e}"),
        }
    }
}
