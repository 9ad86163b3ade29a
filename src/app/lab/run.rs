//! One flow training in the phi^4 lab: its trainer (through the
//! [`TrainerHost`]), its curves, and its latest measurement. On the GPU the
//! measurement's flow samples are drawn by the lattice kernels inside the
//! trainer's task ([`SampleJob`]), in a worker by the worker; either way
//! they are measured on the page's thread.

use crate::app::host::{GpuJob, HostSpec, Progress, TrainerHost};
use crate::gpu::GpuTrainer;
use crate::phi4::estimates::FlowEstimates;
use crate::stats::log_normal;
use eframe::egui::Color32;
use web_time::Duration;

/// Flow samples drawn off the page's thread after some steps (on the GPU,
/// or by the run's worker): fields (n x V) and log q.
pub struct GpuSamples {
    pub step: usize,
    pub fields: Vec<f64>,
    pub log_q: Vec<f64>,
}

/// Latent fields (n x V standard normals) for the GPU to push through the flow.
pub struct SampleJob {
    pub latent: Vec<f32>,
}

impl GpuJob for SampleJob {
    type Output = GpuSamples;

    async fn run(self, trainer: &mut GpuTrainer, step: usize) -> Result<GpuSamples, String> {
        let pushed = trainer.x_from_z_async(&self.latent).await?;
        Ok(samples(step, &self.latent, &pushed))
    }
}

/// Fields and log q from latent fields `z` (n x V) and the pushed rows
/// (x, log det: n x (V + 1)).
fn samples(step: usize, z: &[f32], pushed: &[f32]) -> GpuSamples {
    // n x (V + 1) values against n x V: the difference is n
    let n = pushed.len().saturating_sub(z.len()).max(1);
    let v = z.len() / n;
    let mut fields = Vec::with_capacity(n * v);
    let mut log_q = Vec::with_capacity(n);
    for (zi, row) in z.chunks(v).zip(pushed.chunks(v + 1)) {
        fields.extend(row[..v].iter().map(|&x| x as f64));
        let z64: Vec<f64> = zi.iter().map(|&x| x as f64).collect();
        log_q.push(log_normal(&z64) - row[v] as f64);
    }
    GpuSamples {
        step,
        fields,
        log_q,
    }
}

/// One flow training in the lab.
pub struct LabRun {
    /// the design, e.g. "coupling sinh Z2"
    pub label: String,
    pub colour: Color32,
    pub host: TrainerHost<SampleJob>,
    /// (step, value) series: the batch loss every step, the rest at each
    /// measurement
    pub losses: Vec<(usize, f64)>,
    pub ess: Vec<(usize, f64)>,
    pub acceptance: Vec<(usize, f64)>,
    pub positive: Vec<(usize, f64)>,
    /// the latest measurement
    pub estimates: Option<FlowEstimates>,
    /// a few flow samples (V values each)
    pub fields: Vec<Vec<f64>>,
    /// the step of the last measurement asked for
    pub measured_at: Option<usize>,
    /// why training stopped (the trainer kept the last good parameters)
    pub stopped: Option<String>,
    /// time spent in training steps (not measurements), for the step rate
    train_time: Duration,
}

impl LabRun {
    /// A run of `spec` labelled `label`, on the offered GPU or the CPU.
    pub fn new(
        label: String,
        colour: Color32,
        spec: HostSpec,
        offer: crate::app::host::GpuOffer,
    ) -> Result<Self, String> {
        Ok(Self {
            label,
            colour,
            host: TrainerHost::new(spec, offer)?.paced_to_budget(),
            losses: Vec::new(),
            ess: Vec::new(),
            acceptance: Vec::new(),
            positive: Vec::new(),
            estimates: None,
            fields: Vec::new(),
            measured_at: None,
            stopped: None,
            train_time: Duration::ZERO,
        })
    }

    /// Training steps done.
    pub fn steps(&self) -> usize {
        self.host.steps_done()
    }

    /// Mean wall time of a training step so far, in milliseconds.
    pub fn ms_per_step(&self) -> Option<f64> {
        let n = self.losses.len();
        (n > 0).then(|| self.train_time.as_secs_f64() * 1e3 / n as f64)
    }

    /// Whether it trains on the GPU.
    pub fn on_gpu(&self) -> bool {
        self.host.on_gpu()
    }

    /// Records a frame's training; returns the flow samples the GPU or the
    /// worker drew, if they came.
    pub fn take(&mut self, progress: Progress<GpuSamples>) -> Option<GpuSamples> {
        self.losses.extend(progress.losses);
        self.train_time += Duration::from_secs_f64(progress.seconds);
        if let Some(why) = progress.stopped {
            self.stopped = Some(match progress.divergence {
                Some(_) => format!(
                    "{why}. Likely cause: the learning rate, {}, is too high for this design",
                    self.host.learning_rate()
                ),
                None => why,
            });
        }
        let from_worker = progress.sampled.map(|s| GpuSamples {
            step: s.step,
            fields: s.fields,
            log_q: s.log_q,
        });
        progress.output.or(from_worker)
    }

    /// Goes on from the last good state (the last checkpoint, when the loss
    /// drifted away from it) with half the step size; the curves go back to
    /// that step.
    pub fn resume(&mut self) -> Result<(), String> {
        let (step, lr) = self.host.go_on_at_half_rate()?;
        self.stopped = None;
        for series in [
            &mut self.losses,
            &mut self.ess,
            &mut self.acceptance,
            &mut self.positive,
        ] {
            series.retain(|&(at, _)| at <= step);
        }
        self.measured_at = self.measured_at.map(|at| at.min(step));
        self.label = format!(
            "{} (lr {lr:.0e})",
            self.label.split(" (lr").next().unwrap_or("")
        );
        Ok(())
    }
}
