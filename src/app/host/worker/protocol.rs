//! The messages between the page and its training worker, and their wire
//! form: a JSON value for the fields and, beside it, the model's parameters
//! as plain numbers (a typed array in the browser), so a large model crosses
//! without being written out as text.

use crate::app::host::HostSpec;
use crate::app::playground::picture::Picture;
use crate::run::model_file::{model_from_json, model_to_json};
use crate::target::{ImageDensity, Target};
use crate::train::metrics::ModelMeasures;
use crate::train::{Loss, TrainSettings};
use glam::{Vec2, vec2};
use serde_json::{Value, json};

/// What the page asks of its worker.
#[derive(Clone, Debug, PartialEq)]
pub enum ToWorker {
    /// Build the trainer. Answered by one [`FromWorker::Trained`] without
    /// steps (its parameters, generation 0), or [`FromWorker::Failed`].
    Start(WorkerSpec),
    /// Train until the trainer's own count reaches `until` (no further: a
    /// count at or below it stops). `base` turns that count into the run's
    /// step, for the checkpoints.
    Train { until: usize, base: i64 },
    /// Adam's step size from the next step.
    SetLearningRate(f64),
    /// Replace the parameters (same structure); the replies from now on carry
    /// `generation`.
    SetModel { generation: u64, params: Vec<f64> },
    /// To a helper: compute a share of a step. Answered by
    /// [`FromWorker::PartsDone`].
    Parts(PartsJob),
    /// To the lead: a helper's share of a step, computed.
    PartsDone(PartsDone),
    /// To the lead: a helper broke; the message says why.
    HelperFailed(String),
    /// Draw the playground's views of the parameters as they stand (or of a
    /// cut of the page's, for "Layer by layer"), between stretches of
    /// training, so the page's thread does not. Answered by
    /// [`FromWorker::Drawn`].
    Draw(DrawJob),
    /// Push the lab's latent fields (n x V standard normals) through the
    /// flow as it stands, for a measurement. Answered by
    /// [`FromWorker::Sampled`].
    Sample { latent: Vec<f64> },
}

/// The finest density grid a drawing may ask for (the views' finest is 256).
pub const MAX_DRAWN_GRID: usize = 2048;

/// What the views are drawn with.
#[derive(Clone, Debug, PartialEq)]
pub struct DrawJob {
    /// the samples' latent points (x, y pairs), drawn by the page so a redraw
    /// at another density size shows the same samples
    pub latent: Vec<f32>,
    /// the side of the density's grid
    pub n: usize,
    /// the metrics to measure with the drawing, if any
    pub measure: Option<MeasureJob>,
    /// draw these parameters cut after some maps ("Layer by layer"), not
    /// the trainer's own as they stand
    pub cut: Option<DrawCut>,
}

/// A model the page holds (parameters of the run's structure), cut after its
/// first `maps` maps.
#[derive(Clone, Debug, PartialEq)]
pub struct DrawCut {
    pub params: Vec<f64>,
    pub maps: usize,
}

/// What the page measures of a model beside its views, asked of the worker
/// with a drawing ([`crate::train::metrics::model_measures`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MeasureJob {
    /// held-out target samples (n x dim), whose mean -log q is measured
    pub held_out: Vec<f64>,
    /// flow samples for the reverse KL and ESS/N (0: not measured)
    pub reverse_samples: usize,
    /// the page's step base (the run's step is it plus the trainer's count;
    /// the reverse samples' seed follows the step)
    pub base: i64,
}

/// A worker's answer to [`ToWorker::Draw`].
#[derive(Clone, Debug, PartialEq)]
pub struct Drawn {
    /// the trainer's own step count when drawn
    pub steps_done: usize,
    /// the parameters' generation ([`ToWorker::SetModel`])
    pub generation: u64,
    /// the parameters drawn (the page rebuilds the model from them)
    pub params: Vec<f64>,
    pub views: DrawnViews,
    /// the metrics, where they were asked for
    pub measures: Option<ModelMeasures>,
    /// the maps the model was cut after, for a cut's drawing
    pub cut: Option<usize>,
    /// seconds the drawing took
    pub seconds: f64,
}

/// What the views draw, as a [`Picture`] holds it, without the model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrawnViews {
    pub n: usize,
    pub log_q: Vec<f32>,
    pub samples: Vec<Vec2>,
    pub lines: Vec<Vec<(Vec2, f32)>>,
    pub center: Option<Vec2>,
    pub scale: Option<Vec2>,
}

impl DrawnViews {
    /// A picture's views (its model and step stay behind).
    pub fn from_picture(picture: Picture) -> Self {
        Self {
            n: picture.n,
            log_q: picture.log_q,
            samples: picture.samples,
            lines: picture.lines,
            center: picture.center,
            scale: picture.scale,
        }
    }

    /// The picture of `model` at `step` these views show.
    pub fn into_picture(self, step: usize, model: crate::flow::FlowModel<f64>) -> Picture {
        Picture {
            log_q: self.log_q,
            n: self.n,
            samples: self.samples,
            lines: self.lines,
            center: self.center,
            scale: self.scale,
            model: Some((step, model)),
            peak: None,
        }
    }
}

/// A share of one training step for a helper worker: the parts numbered
/// `parts` of `batch`, on the lead's parameters of the moment.
#[derive(Clone, Debug, PartialEq)]
pub struct PartsJob {
    /// the lead's count of split steps, to match the answer
    pub step: u64,
    pub parts: std::ops::Range<usize>,
    pub params: Vec<f32>,
    pub batch: Vec<f32>,
}

/// A helper's answer to a [`PartsJob`]: the loss sum and gradient of each
/// of its parts, from `first` on.
#[derive(Clone, Debug, PartialEq)]
pub struct PartsDone {
    pub step: u64,
    pub first: usize,
    pub losses: Vec<f64>,
    /// the parts' gradients one after the other
    pub grads: Vec<f32>,
}

/// What the worker hands back.
#[derive(Clone, Debug, PartialEq)]
pub enum FromWorker {
    /// Steps taken since the last reply.
    Trained(Trained),
    /// The trainer could not be built, or the worker broke; the message says why.
    Failed(String),
    /// A helper's share of a step ([`ToWorker::Parts`]).
    PartsDone(PartsDone),
    /// The views, drawn ([`ToWorker::Draw`]).
    Drawn(Box<Drawn>),
    /// Flow samples ([`ToWorker::Sample`]).
    Sampled(Sampled),
}

/// A worker's answer to [`ToWorker::Sample`].
#[derive(Clone, Debug, PartialEq)]
pub struct Sampled {
    /// the trainer's own step count when sampled
    pub steps_done: usize,
    /// the parameters' generation ([`ToWorker::SetModel`])
    pub generation: u64,
    /// the fields, n x V
    pub fields: Vec<f64>,
    /// their log q
    pub log_q: Vec<f64>,
}

impl FromWorker {
    /// What a helper's reply tells its lead: its share of a step, or that
    /// it broke (the answer to starting is nothing to the lead).
    pub fn for_lead(self) -> Option<ToWorker> {
        match self {
            Self::PartsDone(done) => Some(ToWorker::PartsDone(done)),
            Self::Failed(why) => Some(ToWorker::HelperFailed(why)),
            Self::Trained(t) => t.error.map(ToWorker::HelperFailed),
            // a helper is never asked to draw or sample
            Self::Drawn(_) | Self::Sampled(_) => None,
        }
    }
}

/// A stretch of training.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trained {
    /// the batch loss of each step, in order
    pub losses: Vec<f64>,
    /// the trainer's own step count after them
    pub steps_done: usize,
    /// the parameters the steps were taken on ([`ToWorker::SetModel`])
    pub generation: u64,
    /// the parameters after the last step, when they came along (at a
    /// checkpoint, at `until`, after a stop, and every so often)
    pub params: Option<Vec<f64>>,
    /// why training stopped (a failed step, undone)
    pub error: Option<String>,
    /// seconds the steps took
    pub seconds: f64,
    /// in the answer to [`ToWorker::Start`]: the helpers the worker splits
    /// its steps with (fewer than asked when some could not be started)
    pub helpers: Option<usize>,
}

/// What a worker builds its trainer from: a [`HostSpec`] in a form that
/// crosses to another instance of the program.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerSpec {
    pub model: Value,
    pub target: Value,
    pub batch: usize,
    pub learning_rate: f64,
    pub seed: u64,
    pub reverse_kl: bool,
    pub fixed_centre: bool,
    /// further workers the batch is split with (0: this worker alone)
    pub helpers: usize,
}

impl WorkerSpec {
    /// The spec of `host`'s run, for a worker (which trains on one thread).
    pub fn from_host(spec: &HostSpec) -> Self {
        Self {
            model: model_to_json(&spec.model),
            target: target_to_json(&spec.target),
            batch: spec.settings.batch,
            learning_rate: spec.settings.learning_rate,
            seed: spec.settings.seed,
            reverse_kl: spec.settings.loss == Loss::ReverseKl,
            fixed_centre: spec.fixed_centre,
            helpers: super::helpers(),
        }
    }

    /// The run again, on this side.
    pub fn to_host(&self) -> Result<HostSpec, String> {
        let target = target_from_json(&self.target)?;
        let model = model_from_json(&self.model, Some(target.dim()))?;
        Ok(HostSpec {
            model,
            target,
            settings: TrainSettings {
                batch: self.batch,
                learning_rate: self.learning_rate,
                seed: self.seed,
                loss: if self.reverse_kl {
                    Loss::ReverseKl
                } else {
                    Loss::ForwardKl
                },
                threads: 1,
            },
            fixed_centre: self.fixed_centre,
        })
    }
}

/// A message on the wire: its fields, and numbers beside them (a typed
/// array each in the browser): float64 ones (the page's parameters, a
/// helper's losses) and float32 ones (what a helper and its lead exchange
/// every step, the trainer's own precision, in half the bytes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Wire {
    pub json: Value,
    pub params: Option<Vec<f64>>,
    pub floats: Option<Vec<f32>>,
}

impl ToWorker {
    pub fn to_wire(&self) -> Wire {
        let fields = |json: Value| Wire {
            json,
            ..Wire::default()
        };
        match self {
            Self::Start(s) => fields(
                json!({"kind": "start", "model": s.model, "target": s.target, "batch": s.batch,
                       "learning_rate": s.learning_rate, "seed": s.seed.to_string(),
                       "reverse_kl": s.reverse_kl, "fixed_centre": s.fixed_centre,
                       "helpers": s.helpers}),
            ),
            Self::Train { until, base } => {
                fields(json!({"kind": "train", "until": until, "base": base}))
            }
            Self::SetLearningRate(lr) => fields(json!({"kind": "learning_rate", "value": lr})),
            Self::SetModel { generation, params } => Wire {
                json: json!({"kind": "set_model", "generation": generation}),
                params: Some(params.clone()),
                floats: None,
            },
            // the float32 numbers: the parameters, then the batch
            Self::Parts(job) => Wire {
                json: json!({"kind": "parts", "step": job.step, "first": job.parts.start,
                             "end": job.parts.end, "n_params": job.params.len()}),
                params: None,
                floats: Some([job.params.as_slice(), &job.batch].concat()),
            },
            Self::PartsDone(done) => done.to_wire(),
            Self::HelperFailed(why) => fields(json!({"kind": "helper_failed", "message": why})),
            // the float64 numbers: the cut's parameters, then the held-out samples
            Self::Draw(job) => {
                let cut = job.cut.as_ref().map_or(&[][..], |c| &c.params);
                let held_out = job.measure.as_ref().map_or(&[][..], |m| &m.held_out);
                Wire {
                    json: json!({"kind": "draw", "n": job.n,
                                 "measure": job.measure.as_ref().map(|m| json!({
                                     "reverse_samples": m.reverse_samples, "base": m.base})),
                                 "cut": job.cut.as_ref().map(|c| json!({
                                     "maps": c.maps, "params": c.params.len()}))}),
                    params: Some([cut, held_out].concat()),
                    floats: Some(job.latent.clone()),
                }
            }
            Self::Sample { latent } => Wire {
                json: json!({"kind": "sample"}),
                params: Some(latent.clone()),
                floats: None,
            },
        }
    }

    pub fn from_wire(wire: Wire) -> Result<Self, String> {
        let v = &wire.json;
        Ok(match kind(v)? {
            "start" => Self::Start(WorkerSpec {
                model: v.get("model").cloned().ok_or("start: no model")?,
                target: v.get("target").cloned().ok_or("start: no target")?,
                batch: count(v, "batch")?,
                learning_rate: real(v, "learning_rate")?,
                seed: v
                    .get("seed")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok())
                    .ok_or("start: no seed")?,
                reverse_kl: flag(v, "reverse_kl")?,
                fixed_centre: flag(v, "fixed_centre")?,
                helpers: v.get("helpers").and_then(Value::as_u64).unwrap_or(0) as usize,
            }),
            "train" => Self::Train {
                until: count(v, "until")?,
                base: v
                    .get("base")
                    .and_then(Value::as_i64)
                    .ok_or("train: no base")?,
            },
            "learning_rate" => Self::SetLearningRate(real(v, "value")?),
            "set_model" => Self::SetModel {
                generation: generation(v)?,
                params: wire.params.ok_or("set_model: no parameters")?,
            },
            "parts" => {
                let numbers = wire.floats.ok_or("parts: no numbers")?;
                let n_params = count(v, "n_params")?;
                if numbers.len() < n_params {
                    return Err("parts: fewer numbers than parameters".into());
                }
                let (params, batch) = numbers.split_at(n_params);
                Self::Parts(PartsJob {
                    step: count(v, "step")? as u64,
                    parts: count(v, "first")?..count(v, "end")?,
                    params: params.to_vec(),
                    batch: batch.to_vec(),
                })
            }
            "parts_done" => Self::PartsDone(PartsDone::from_wire(wire)?),
            "helper_failed" => Self::HelperFailed(message(v)),
            "draw" => {
                let numbers = wire.params.unwrap_or_default();
                let cut = v.get("cut").filter(|c| !c.is_null());
                let n_cut = match cut {
                    Some(c) => count(c, "params")?,
                    None => 0,
                };
                if numbers.len() < n_cut {
                    return Err("draw: fewer numbers than the cut's parameters".into());
                }
                let (cut_params, held_out) = numbers.split_at(n_cut);
                Self::Draw(DrawJob {
                    latent: wire.floats.ok_or("draw: no latent points")?,
                    n: Some(count(v, "n")?)
                        .filter(|&n| n <= MAX_DRAWN_GRID)
                        .ok_or("draw: a density grid finer than any view")?,
                    measure: match v.get("measure").filter(|m| !m.is_null()) {
                        Some(m) => Some(MeasureJob {
                            held_out: held_out.to_vec(),
                            reverse_samples: count(m, "reverse_samples")?,
                            base: m
                                .get("base")
                                .and_then(Value::as_i64)
                                .ok_or("draw: no step base")?,
                        }),
                        None => None,
                    },
                    cut: match cut {
                        Some(c) => Some(DrawCut {
                            params: cut_params.to_vec(),
                            maps: count(c, "maps")?,
                        }),
                        None => None,
                    },
                })
            }
            "sample" => Self::Sample {
                latent: wire.params.ok_or("sample: no latent fields")?,
            },
            other => return Err(format!("unknown message '{other}'")),
        })
    }
}

impl FromWorker {
    pub fn to_wire(&self) -> Wire {
        match self {
            Self::Trained(t) => Wire {
                json: json!({"kind": "trained", "losses": t.losses, "steps_done": t.steps_done,
                             "generation": t.generation, "error": t.error, "seconds": t.seconds,
                             "helpers": t.helpers}),
                params: t.params.clone(),
                floats: None,
            },
            Self::Failed(why) => Wire {
                json: json!({"kind": "failed", "message": why}),
                ..Wire::default()
            },
            Self::PartsDone(done) => done.to_wire(),
            Self::Drawn(drawn) => drawn.to_wire(),
            // the fields, then their log q
            Self::Sampled(sampled) => Wire {
                json: json!({"kind": "sampled", "steps_done": sampled.steps_done,
                             "generation": sampled.generation, "n": sampled.log_q.len()}),
                params: Some([sampled.fields.as_slice(), &sampled.log_q].concat()),
                floats: None,
            },
        }
    }

    pub fn from_wire(wire: Wire) -> Result<Self, String> {
        let v = &wire.json;
        Ok(match kind(v)? {
            "drawn" => Self::Drawn(Box::new(Drawn::from_wire(wire)?)),
            "sampled" => {
                let n = count(v, "n")?;
                let numbers = wire.params.ok_or("sampled: no numbers")?;
                if numbers.len() < n {
                    return Err("sampled: fewer numbers than samples".into());
                }
                let (fields, log_q) = numbers.split_at(numbers.len() - n);
                Self::Sampled(Sampled {
                    steps_done: count(v, "steps_done")?,
                    generation: generation(v)?,
                    fields: fields.to_vec(),
                    log_q: log_q.to_vec(),
                })
            }
            "trained" => Self::Trained(Trained {
                // a loss that is not finite travels as null
                losses: v
                    .get("losses")
                    .and_then(Value::as_array)
                    .ok_or("trained: no losses")?
                    .iter()
                    .map(|l| l.as_f64().unwrap_or(f64::NAN))
                    .collect(),
                steps_done: count(v, "steps_done")?,
                generation: generation(v)?,
                params: wire.params,
                error: v.get("error").and_then(Value::as_str).map(str::to_string),
                seconds: real(v, "seconds")?,
                helpers: v.get("helpers").and_then(Value::as_u64).map(|h| h as usize),
            }),
            "failed" => Self::Failed(message(v)),
            "parts_done" => Self::PartsDone(PartsDone::from_wire(wire)?),
            other => return Err(format!("unknown message '{other}'")),
        })
    }
}

impl PartsDone {
    /// Its wire form, the same from a helper and to its lead: the step, the
    /// first part and the losses as float64 numbers (so a loss that is not
    /// finite crosses as it is), the gradients as float32 ones.
    fn to_wire(&self) -> Wire {
        let head = [self.step as f64, self.first as f64];
        Wire {
            json: json!({"kind": "parts_done"}),
            params: Some(
                head.into_iter()
                    .chain(self.losses.iter().copied())
                    .collect(),
            ),
            floats: Some(self.grads.clone()),
        }
    }

    fn from_wire(wire: Wire) -> Result<Self, String> {
        let numbers = wire.params.ok_or("parts_done: no numbers")?;
        let whole = |x: f64| (x >= 0.0 && x.fract() == 0.0).then_some(x);
        let (Some(step), Some(first)) = (
            numbers.first().copied().and_then(whole),
            numbers.get(1).copied().and_then(whole),
        ) else {
            return Err("parts_done: no step and first part".into());
        };
        Ok(Self {
            step: step as u64,
            first: first as usize,
            losses: numbers[2..].to_vec(),
            grads: wire.floats.ok_or("parts_done: no gradients")?,
        })
    }
}

impl Drawn {
    /// Its wire form: the counts as fields, the parameters as float64
    /// numbers, and the views' numbers as float32 ones, one after the other:
    /// the density's n x n values, the samples' (x, y), each line's (x, y,
    /// log det) and the centre's and the scales' (x, y) where there are some.
    fn to_wire(&self) -> Wire {
        let views = &self.views;
        let mut floats = views.log_q.clone();
        floats.extend(views.samples.iter().flat_map(|p| [p.x, p.y]));
        for line in &views.lines {
            floats.extend(line.iter().flat_map(|(p, ld)| [p.x, p.y, *ld]));
        }
        for v in views.center.iter().chain(&views.scale) {
            floats.extend([v.x, v.y]);
        }
        let lines: Vec<usize> = views.lines.iter().map(Vec::len).collect();
        Wire {
            json: json!({"kind": "drawn", "steps_done": self.steps_done,
                         "generation": self.generation, "seconds": self.seconds,
                         "n": views.n, "samples": views.samples.len(), "lines": lines,
                         "center": views.center.is_some(), "scale": views.scale.is_some(),
                         "measures": self.measures.map(|m| json!({
                             "held_out_nll": m.held_out_nll, "reverse_kl": m.reverse_kl,
                             "ess": m.ess})),
                         "cut": self.cut}),
            params: Some(self.params.clone()),
            floats: Some(floats),
        }
    }

    fn from_wire(wire: Wire) -> Result<Self, String> {
        let v = &wire.json;
        let n = count(v, "n")?;
        let lines: Vec<usize> = v
            .get("lines")
            .and_then(Value::as_array)
            .ok_or("drawn: no lines")?
            .iter()
            .map(|l| l.as_u64().and_then(|l| usize::try_from(l).ok()))
            .collect::<Option<_>>()
            .ok_or("drawn: a line's length is not a whole number")?;
        let samples = count(v, "samples")?;
        let (center, scale) = (flag(v, "center")?, flag(v, "scale")?);
        let floats = wire.floats.ok_or("drawn: no numbers")?;
        let expected = n
            .checked_mul(n)
            .and_then(|d| d.checked_add(samples.checked_mul(2)?))
            .and_then(|k| {
                lines
                    .iter()
                    .try_fold(k, |k, &l| k.checked_add(l.checked_mul(3)?))
            })
            .and_then(|k| k.checked_add(2 * (usize::from(center) + usize::from(scale))));
        if expected != Some(floats.len()) {
            return Err("drawn: the numbers do not fit the counts".into());
        }
        let (log_q, rest) = floats.split_at(n * n);
        let (points, mut rest) = rest.split_at(2 * samples);
        let mut drawn_lines = Vec::with_capacity(lines.len());
        for len in lines {
            let (line, after) = rest.split_at(3 * len);
            drawn_lines.push(
                line.chunks_exact(3)
                    .map(|p| (vec2(p[0], p[1]), p[2]))
                    .collect(),
            );
            rest = after;
        }
        let mut pairs = rest.chunks_exact(2).map(|p| vec2(p[0], p[1]));
        let center = if center { pairs.next() } else { None };
        let scale = if scale { pairs.next() } else { None };
        Ok(Self {
            steps_done: count(v, "steps_done")?,
            generation: generation(v)?,
            params: wire.params.ok_or("drawn: no parameters")?,
            views: DrawnViews {
                n,
                log_q: log_q.to_vec(),
                samples: points.chunks_exact(2).map(|p| vec2(p[0], p[1])).collect(),
                lines: drawn_lines,
                center,
                scale,
            },
            // (a measure that is not finite crosses as null, that is, none)
            measures: v.get("measures").filter(|m| !m.is_null()).map(|m| {
                let value = |key: &str| m.get(key).and_then(Value::as_f64);
                ModelMeasures {
                    held_out_nll: value("held_out_nll"),
                    reverse_kl: value("reverse_kl"),
                    ess: value("ess"),
                }
            }),
            cut: match v.get("cut").filter(|c| !c.is_null()) {
                Some(_) => Some(count(v, "cut")?),
                None => None,
            },
            seconds: real(v, "seconds")?,
        })
    }
}

fn message(v: &Value) -> String {
    v.get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message")
        .to_string()
}

fn kind(v: &Value) -> Result<&str, String> {
    v.get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| "a message without a kind".to_string())
}

fn count(v: &Value, key: &str) -> Result<usize, String> {
    v.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("no whole number '{key}'"))
}

fn real(v: &Value, key: &str) -> Result<f64, String> {
    v.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("no number '{key}'"))
}

fn flag(v: &Value, key: &str) -> Result<bool, String> {
    v.get(key)
        .and_then(Value::as_bool)
        .ok_or_else(|| format!("no flag '{key}'"))
}

fn generation(v: &Value) -> Result<u64, String> {
    v.get("generation")
        .and_then(Value::as_u64)
        .ok_or_else(|| "no generation".to_string())
}

/// A target in a form that rebuilds it exactly: built-in ones by name (phi^4
/// with its lattice and couplings), an image by its cumulative pixel weights.
pub fn target_to_json(target: &Target) -> Value {
    match target {
        Target::Image(image) => {
            let (width, height, cdf) = image.parts();
            json!({"image": {"width": width, "height": height, "cdf": cdf}})
        }
        Target::Phi4(p) => json!({"name": format!(
            "phi4:L={},m2={},lambda={}", p.size, p.couplings.m2, p.couplings.lambda)}),
        Target::RingMixture { rings } => json!({"ring-mixture": rings}),
        other => json!({"name": other.name()}),
    }
}

/// The target [`target_to_json`] wrote.
pub fn target_from_json(v: &Value) -> Result<Target, String> {
    if let Some(name) = v.get("name").and_then(Value::as_str) {
        return Target::parse(name).map_err(|e| e.to_string());
    }
    if let Some(rings) = v.get("ring-mixture").and_then(Value::as_u64) {
        return Ok(Target::RingMixture {
            rings: rings as usize,
        });
    }
    let image = v
        .get("image")
        .ok_or("a target without a name or an image")?;
    let cdf: Vec<f64> = image
        .get("cdf")
        .and_then(Value::as_array)
        .ok_or("an image target without pixels")?
        .iter()
        .map(|c| c.as_f64().unwrap_or(f64::NAN))
        .collect();
    let density = ImageDensity::from_parts(count(image, "width")?, count(image, "height")?, cdf)?;
    Ok(Target::Image(density))
}
