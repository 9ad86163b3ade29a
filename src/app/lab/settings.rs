//! What the user chooses in the phi^4 lab, and its home in the URL.

use crate::app::query::{Entry, apply_query, parse_in, pick, set_if, unknown};
use crate::bijection::Family;
use crate::flow::{Activation, ConvDesign, FlowKind};
use crate::phi4::design::Design;
use crate::target::phi4::{Couplings, Phi4};

/// The flows the lab offers: the lattice coupling flow and the radial flow
/// on the whole field.
/// The ranges the lab's sliders offer, which a link is held to as well.
pub const SIZES: std::ops::RangeInclusive<usize> = 4..=16;
pub const MASSES: std::ops::RangeInclusive<f64> = -8.0..=2.0;
pub const LAMBDAS: std::ops::RangeInclusive<f64> = 0.0..=16.0;
pub const LEARNING_RATES: std::ops::RangeInclusive<f64> = 1e-4..=3e-2;
pub const BATCHES: std::ops::RangeInclusive<usize> = 16..=256;
pub const LAYERS: std::ops::RangeInclusive<usize> = 2..=16;
pub const CHANNELS: std::ops::RangeInclusive<usize> = 2..=32;
/// Kernel sides the lab offers.
pub const KERNELS: [usize; 3] = [1, 3, 5];

pub const FLOWS: [FlowKind; 2] = [FlowKind::Lattice, FlowKind::Radial];

/// The families the lab offers.
pub const FAMILIES: [Family; 4] = [
    Family::CubicRational,
    Family::Sinh,
    Family::Cubic,
    Family::Affine,
];

/// A lab flow's name in links and menus.
pub fn flow_name(kind: FlowKind) -> &'static str {
    match kind {
        FlowKind::Lattice => "coupling",
        other => other.name(),
    }
}

/// What the user chooses in the lab (and its home in the URL).
#[derive(Clone, Debug, PartialEq)]
pub struct LabSettings {
    /// lattice side L (4 to 16, even)
    pub size: usize,
    pub m2: f64,
    pub lambda: f64,
    /// [`FlowKind::Lattice`] or [`FlowKind::Radial`]
    pub flow: FlowKind,
    pub family: Family,
    pub z2: bool,
    pub learning_rate: f64,
    pub batch: usize,
    pub seed: u64,
    /// Coupling layers.
    pub layers: usize,
    /// Channels of each hidden layer of the conditioner.
    pub channels: usize,
    /// Kernel side of the conditioner's convolutions.
    pub kernel: usize,
    pub activation: Activation,
    /// Two plain hidden layers (the tutorials' 1 -> c -> c -> out) instead
    /// of the residual conditioner.
    pub plain: bool,
    /// An affine map before the family on each site (a composite site map).
    pub affine_first: bool,
}

impl Default for LabSettings {
    /// The symmetric point (m^2 = -4, lambda = 8) on an 8 x 8 lattice, with
    /// the best design the README's measurements found there: 16 coupling
    /// layers, an affine map before the cubic rational one on each site, the
    /// residual 3 x 3 GELU conditioner of 8 channels (ESS/N 0.59 after five
    /// minutes natively), which the GPU trainer runs too.
    fn default() -> Self {
        Self {
            size: 8,
            m2: -4.0,
            lambda: 8.0,
            flow: FlowKind::Lattice,
            family: Family::CubicRational,
            z2: false,
            learning_rate: 3e-3,
            batch: 64,
            seed: 0,
            layers: 16,
            channels: 8,
            kernel: 3,
            activation: Activation::Gelu,
            plain: false,
            affine_first: true,
        }
    }
}

impl LabSettings {
    /// The settings as a URL query (without the `?`).
    pub fn to_query(&self) -> String {
        format!(
            "lab=phi4&L={}&m2={}&lambda={}&flow={}&family={}&z2={}&lr={}&batch={}&seed={}\
             &layers={}&channels={}&kernel={}&act={}&plain={}&affine_first={}",
            self.size,
            self.m2,
            self.lambda,
            flow_name(self.flow),
            self.family.name(),
            u8::from(self.z2),
            self.learning_rate,
            self.batch,
            self.seed,
            self.layers,
            self.channels,
            self.kernel,
            self.activation.name(),
            u8::from(self.plain),
            u8::from(self.affine_first),
        )
    }

    /// Settings from a URL query: valid entries are used, the rest named.
    pub fn from_query(query: &str) -> (Self, Vec<String>) {
        let mut s = Self::default();
        let ignored = apply_query(query, |key, value| -> Entry {
            match key {
                "lab" => set_if(&mut (), (), value == "phi4", "phi4"),
                "L" if value.parse::<usize>().is_ok_and(|l| l % 2 == 1) => {
                    Err("the lattice size must be even".into())
                }
                "L" => parse_in(&mut s.size, value, SIZES),
                "m2" => parse_in(&mut s.m2, value, MASSES),
                "lambda" => parse_in(&mut s.lambda, value, LAMBDAS),
                "flow" => pick(&mut s.flow, value, &FLOWS, |&k| flow_name(k)),
                "family" => pick(&mut s.family, value, &FAMILIES, |f| f.name()),
                "z2" => flag(&mut s.z2, value),
                "lr" => parse_in(&mut s.learning_rate, value, LEARNING_RATES),
                "batch" => parse_in(&mut s.batch, value, BATCHES),
                "seed" => parse_in(&mut s.seed, value, 0..=u64::MAX),
                "layers" => parse_in(&mut s.layers, value, LAYERS),
                "channels" => parse_in(&mut s.channels, value, CHANNELS),
                "kernel" => match value.parse::<usize>() {
                    Ok(k) if KERNELS.contains(&k) => {
                        s.kernel = k;
                        Ok(())
                    }
                    _ => Err("one of 1, 3, 5".into()),
                },
                "act" => pick(&mut s.activation, value, &Activation::ALL, |a| a.name()),
                "plain" => flag(&mut s.plain, value),
                "affine_first" => flag(&mut s.affine_first, value),
                _ => unknown(),
            }
        });
        (s, ignored)
    }

    /// The couplings, checked (an action unbounded below is refused).
    pub fn model(&self) -> Result<Phi4, String> {
        Ok(Phi4::new(
            self.size,
            Couplings {
                m2: self.m2,
                lambda: self.lambda,
            },
        )?)
    }

    /// The design these settings describe: for coupling flows the chosen
    /// layers and conditioner (the affine map first unless the family is
    /// affine itself); 8 copies of the family for radial flows.
    pub fn design(&self, family: Family, z2: bool) -> Result<Design, String> {
        let mut design = Design::new(self.flow, family, z2)?;
        let f = &mut design.flow;
        if self.flow == FlowKind::Radial {
            f.stack = 8;
            return Ok(design);
        }
        f.layers = self.layers;
        f.width = self.channels;
        f.first = (self.affine_first && family != Family::Affine).then_some(Family::Affine);
        f.conv = ConvDesign {
            kernel: self.kernel,
            activation: self.activation,
            channels: self.plain.then(|| vec![self.channels; 2]),
            head_bound: 0.0,
        };
        Ok(design)
    }
}

/// A 0/1 link entry.
fn flag(target: &mut bool, value: &str) -> Entry {
    set_if(target, value == "1", value == "0" || value == "1", "0 or 1")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lab link restores its settings; what is malformed or out of range
    /// is named and left at the default.
    #[test]
    fn lab_links_round_trip_and_bad_entries_are_named() {
        let s = LabSettings {
            size: 12,
            m2: -3.5,
            lambda: 2.25,
            flow: FlowKind::Radial,
            family: Family::Sinh,
            z2: true,
            learning_rate: 0.001,
            batch: 32,
            seed: 9,
            layers: 6,
            channels: 12,
            kernel: 5,
            activation: Activation::Tanh,
            plain: true,
            affine_first: true,
        };
        assert_eq!(LabSettings::from_query(&s.to_query()), (s, Vec::new()));
        let (parsed, ignored) = LabSettings::from_query(
            "?lab=phi4&L=5&m2=nan&lambda=3&family=spline&z2=yes&colour=red",
        );
        assert_eq!(parsed.lambda, 3.0);
        assert_eq!(parsed.size, LabSettings::default().size);
        assert_eq!(parsed.family, LabSettings::default().family);
        assert_eq!(
            ignored,
            [
                "L=5 (the lattice size must be even)",
                "m2=nan (not a number)",
                "family=spline (one of cubic_rational, sinh, cubic, affine)",
                "z2=yes (expected 0 or 1)",
                "colour=red (not a setting)"
            ]
        );
    }

    /// The architecture settings reach the design; an affine family is not
    /// put after another affine map.
    #[test]
    fn the_architecture_settings_make_the_design() {
        let s = LabSettings {
            layers: 10,
            channels: 6,
            kernel: 5,
            activation: Activation::LeakyRelu,
            plain: true,
            affine_first: true,
            ..LabSettings::default()
        };
        let d = s.design(Family::Sinh, false).expect("valid");
        assert_eq!(d.flow.layers, 10);
        assert_eq!(d.flow.first, Some(Family::Affine));
        assert_eq!(d.flow.conv.channels, Some(vec![6, 6]));
        assert_eq!(d.flow.conv.kernel, 5);
        assert_eq!(d.flow.conv.activation, Activation::LeakyRelu);
        let affine = s.design(Family::Affine, false).expect("valid");
        assert_eq!(affine.flow.first, None);
        let residual = LabSettings::default()
            .design(Family::Sinh, false)
            .expect("valid");
        assert_eq!(residual.flow.conv.channels, None);
        assert_eq!(residual.flow.width, LabSettings::default().channels);
    }
}
