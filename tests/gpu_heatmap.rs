//! The model view's heat map drawn on the GPU (lavapipe here): its pixels
//! are the page's CPU colour map of the CPU reference density at the same
//! points, for a radial and a coupling flow, on both scales; a heat map on
//! another device than the trainer's is refused.
#![cfg(all(feature = "app", not(target_arch = "wasm32")))]

use flowplay::app::playground::picture::grid_points;
use flowplay::app::widgets::colour::{Scale, colour, normalized};
use flowplay::flow::{FlowConfig, FlowKind, FlowModel};
use flowplay::gpu::GpuTrainer;
use flowplay::gpu::heatmap::Heatmap;
use flowplay::rng::Rng;
use flowplay::target::Target;
use flowplay::train::{Loss, TrainSettings};

mod gpu_common;
use gpu_common::{context, rounded_to_f32};

/// A small trained-looking model of `kind` (parameters moved off the
/// initialisation), with the float32 parameters the GPU holds.
fn model(kind: FlowKind) -> FlowModel<f64> {
    let mut config = FlowConfig::defaults(kind);
    config.stack = 6;
    config.layers = 3;
    config.width = 24;
    let mut rng = Rng::seeded(7);
    let mut model = config.build(2, &mut rng).expect("a valid flow");
    for v in model.as_flow_mut().params_mut() {
        *v += 0.05 * rng.normal();
    }
    rounded_to_f32(model)
}

fn trainer(model: &FlowModel<f64>) -> GpuTrainer {
    let settings = TrainSettings {
        batch: 64,
        learning_rate: 1e-3,
        seed: 0,
        loss: Loss::ForwardKl,
        threads: 1,
    };
    let target = Target::parse("moons").expect("a target");
    GpuTrainer::new(context(), model.clone(), target, settings).expect("a GPU trainer")
}

/// The CPU's picture of `model` at n x n texels: RGBA bytes, row 0 at the top.
fn cpu_pixels(model: &FlowModel<f64>, n: usize, scale: Scale) -> Vec<u8> {
    let points = grid_points(n);
    let log_q: Vec<f32> = flowplay::train::metrics::log_q(model.as_flow(), &points)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    normalized(&log_q, scale)
        .into_iter()
        .flat_map(|t| colour(t).to_array())
        .collect()
}

/// Every channel within `tolerance` levels on all but `spare` of the pixels
/// (float32 against float64 moves a colour across a byte now and then).
fn assert_pixels_close(label: &str, gpu: &[u8], cpu: &[u8], tolerance: u8, spare: f64) {
    assert_eq!(gpu.len(), cpu.len(), "{label}: size");
    let pixels = gpu.len() / 4;
    let off = gpu
        .chunks(4)
        .zip(cpu.chunks(4))
        .filter(|(g, c)| {
            g.iter()
                .zip(c.iter())
                .any(|(a, b)| a.abs_diff(*b) > tolerance)
        })
        .count();
    assert!(
        (off as f64) <= spare * pixels as f64,
        "{label}: {off} of {pixels} pixels differ by more than {tolerance}"
    );
    let worst = gpu
        .iter()
        .zip(cpu)
        .map(|(a, b)| a.abs_diff(*b))
        .max()
        .unwrap_or(0);
    assert!(worst <= 40, "{label}: a channel off by {worst}");
    assert!(gpu.chunks(4).all(|p| p[3] == 255), "{label}: opaque");
}

#[test]
fn the_gpu_heat_map_is_the_cpu_picture_of_the_density() {
    let n = 128;
    let points: Vec<f32> = grid_points(n).into_iter().map(|v| v as f32).collect();
    for kind in [FlowKind::Radial, FlowKind::Coupling] {
        let model = model(kind);
        let mut trainer = trainer(&model);
        let heatmap = Heatmap::new(trainer.context(), n, &points, false).expect("a heat map");
        heatmap.draw(&mut trainer).expect("drawn");
        for scale in [Scale::Log, Scale::Linear] {
            heatmap.set_linear(scale == Scale::Linear);
            heatmap.recolour();
            let gpu = heatmap.pixels().expect("pixels back");
            let cpu = cpu_pixels(&model, n, scale);
            let label = format!("{kind:?}, {scale:?}");
            assert_pixels_close(&label, &gpu, &cpu, 2, 0.01);
            // a picture, not a flat colour
            let distinct: std::collections::HashSet<&[u8]> = gpu.chunks(4).collect();
            assert!(distinct.len() > 50, "{label}: {} colours", distinct.len());
        }
        let peak = pollster::block_on(heatmap.peak_async()).expect("the peak");
        let log_q = pollster::block_on(heatmap.log_q_async()).expect("log q");
        let top = log_q
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(f32::MIN, f32::max);
        assert_eq!(peak, top, "{kind:?}: the peak");
    }
}

#[test]
fn a_heat_map_draws_only_its_own_devices_trainer() {
    let model = model(FlowKind::Radial);
    let mut trainer = trainer(&model);
    let elsewhere = context();
    let n = 16;
    let points: Vec<f32> = grid_points(n).into_iter().map(|v| v as f32).collect();
    let heatmap = Heatmap::new(&elsewhere, n, &points, false).expect("a heat map");
    let err = heatmap.draw(&mut trainer).unwrap_err().to_string();
    assert!(err.contains("another GPU device"), "{err}");
    assert!(Heatmap::new(&elsewhere, n, &points[2..], false).is_err());
}
