//! Training end to end: the paper's reference recipe, reverse KL, divergence.

use flowplay::bijection::Family;
use flowplay::flow::{FlowConfig, FlowKind};
use flowplay::rng::Rng;
use flowplay::run::report::report;
use flowplay::target::Target;
use flowplay::train::SetupError;
use flowplay::train::config::{Precision, RunConfig, train};
use flowplay::train::{CpuTrainer, Loss, TrainError, TrainSettings, Trainer};

/// The paper's reference recipe: angle-dependent radial flow (64 x cubic, Fourier
/// conditioner, centre (-0.5, -1)), spiral, Adam 1e-2, batch 512, 5000 steps,
/// forward KL. bijx reaches -0.636 nats; the issue asks for <= -0.62.
#[test]
fn spiral_reference_recipe_reaches_the_papers_nll() {
    let mut flow = FlowConfig::defaults(FlowKind::RadialFourier);
    flow.center = Some(vec![-0.5, -1.0]);
    flow.log_scale = Some(vec![0.0, 0.0]);
    let config = RunConfig {
        target: Target::Spiral,
        flow,
        steps: 5000,
        settings: TrainSettings {
            batch: 512,
            learning_rate: 1e-2,
            seed: 0,
            loss: Loss::ForwardKl,
            threads: 2,
        },
        precision: Precision::F32,
        eval_samples: 20_000,
    };
    let outcome = train(&config, &mut |_, _| {}).unwrap();
    assert!(outcome.stopped.is_none());
    let r = report(&config, &outcome);
    let nll = r["test_nll"].as_f64().unwrap();
    eprintln!(
        "spiral recipe: held-out NLL {nll:.4} nats in {:.1} s",
        outcome.seconds
    );
    assert_eq!(r["n_params"], 1796);
    assert!(nll <= -0.62, "held-out NLL {nll}");
}

/// bijx's 1D demo: a stack of cubic conjugations trained by reverse KL.
#[test]
fn reverse_kl_learns_the_1d_target() {
    let mut flow = FlowConfig::defaults(FlowKind::Elementwise);
    flow.stack = 64;
    let config = RunConfig {
        target: Target::Poly1d,
        flow,
        steps: 4000,
        settings: TrainSettings {
            batch: 256,
            learning_rate: 1e-2,
            seed: 1,
            loss: Loss::ReverseKl,
            threads: 2,
        },
        precision: Precision::F32,
        eval_samples: 20_000,
    };
    let outcome = train(&config, &mut |_, _| {}).unwrap();
    let r = report(&config, &outcome);
    let kl = r["reverse_kl"].as_f64().unwrap();
    let ess = r["ess"].as_f64().unwrap();
    let acc = r["acceptance"].as_f64().unwrap();
    eprintln!("poly1d: reverse KL {kl:.4}, ESS/N {ess:.3}, acceptance {acc:.3}");
    assert_eq!(r["log_z_known"], true);
    assert!(kl < 0.2, "reverse KL {kl}");
    assert!(ess > 0.25 && acc > 0.5, "ESS/N {ess}, acceptance {acc}");
    // An untrained flow is far worse.
    let mut rng = Rng::seeded(1);
    let untrained = config.flow.build::<f64>(1, &mut rng).unwrap();
    let m = flowplay::train::metrics::reverse_metrics(
        untrained.as_flow(),
        &Target::Poly1d,
        5000,
        &mut rng,
    )
    .unwrap();
    assert!(
        m.reverse_kl > kl + 0.5,
        "untrained {} vs trained {kl}",
        m.reverse_kl
    );
}

/// A coupling flow of 4 layers of width 32 (enough parameters for the
/// optimizer's step to be split over threads) training on the moons by
/// forward KL, model and batches seeded by `seed`.
fn small_coupling_trainer(seed: u64, batch: usize, threads: usize) -> CpuTrainer<f32> {
    let mut config = FlowConfig::defaults(FlowKind::Coupling);
    config.layers = 4;
    config.width = 32;
    let mut rng = Rng::seeded(seed);
    let model = config.build::<f64>(2, &mut rng).unwrap();
    let settings = TrainSettings {
        batch,
        learning_rate: 1e-2,
        seed,
        loss: Loss::ForwardKl,
        threads,
    };
    CpuTrainer::<f32>::new(model, Target::Moons, settings).unwrap()
}

/// A seeded run is the same run on any machine: the batch's parts, not the
/// threads, set where the gradient's sums round, so one thread and three give
/// the same losses to the last bit (a classroom link reproduces a run step
/// for step).
#[test]
fn a_seeded_run_gives_the_same_losses_on_any_number_of_threads() {
    let losses = |threads| {
        let mut trainer = small_coupling_trainer(3, 100, threads);
        (0..40)
            .map(|_| trainer.step().unwrap().to_bits())
            .collect::<Vec<u64>>()
    };
    let one = losses(1);
    assert_eq!(losses(3), one);
    assert_eq!(losses(2), one);
}

/// Held parameters stay where they are when the optimizer's step is split
/// over threads in blocks, the held range crossing the blocks' boundaries,
/// and the run is the one-thread run.
#[test]
fn a_held_range_across_the_threads_blocks_stays_put() {
    let params = |threads| {
        let mut trainer = small_coupling_trainer(4, 64, threads);
        let n = trainer.params_t().len();
        assert!(
            n >= flowplay::train::adam::SPLIT_FROM,
            "{n} parameters: not split"
        );
        let held = n / 4..3 * n / 4;
        trainer.freeze(held.clone());
        let start = trainer.params_t().to_vec();
        for _ in 0..5 {
            trainer.step().unwrap();
        }
        let end = trainer.params_t().to_vec();
        assert_eq!(end[held.clone()], start[held.clone()]);
        assert_ne!(end[..held.start], start[..held.start]);
        assert_ne!(end[held.end..], start[held.end..]);
        end.iter().map(|p| p.to_bits()).collect::<Vec<u32>>()
    };
    assert_eq!(params(3), params(1));
}

/// A step split between a lead and helpers (each computing some of the
/// batch's parts on its own copy of the parameters, the lead summing) is the
/// same step, bit for bit, as the lead taking every part itself.
#[test]
fn a_step_split_between_trainers_is_the_same_step() {
    let new_trainer = |loss| {
        let mut config = FlowConfig::defaults(FlowKind::Coupling);
        config.layers = 2;
        config.width = 16;
        let mut rng = Rng::seeded(5);
        let model = config.build::<f64>(2, &mut rng).unwrap();
        let settings = TrainSettings {
            batch: 90,
            learning_rate: 1e-2,
            seed: 5,
            loss,
            threads: 1,
        };
        let target = match loss {
            Loss::ForwardKl => Target::Moons,
            Loss::ReverseKl => Target::EightGaussians,
        };
        CpuTrainer::<f32>::new(model, target, settings).unwrap()
    };
    for loss in [Loss::ForwardKl, Loss::ReverseKl] {
        let mut whole = new_trainer(loss);
        let mut lead = new_trainer(loss);
        let mut helpers = [new_trainer(loss), new_trainer(loss)];
        for step in 0..15 {
            let expected = whole.step().unwrap();
            let batch = lead.draw_batch();
            let parts = lead.part_count(&batch);
            assert_eq!(parts, 8);
            let mut losses = lead.compute_parts(&batch, 0..3);
            for (helper, share) in helpers.iter_mut().zip([3..4, 4..8]) {
                assert!(helper.set_params_t(lead.params_t()));
                losses.extend(helper.compute_parts(&batch, share.clone()));
                for part in share {
                    let grad = helper.part_grad(part).to_vec();
                    lead.set_part_grad(part, &grad);
                }
            }
            let got = lead.finish_step(&losses).unwrap();
            assert_eq!(got.to_bits(), expected.to_bits(), "{loss:?}, step {step}");
            assert_eq!(lead.params_t(), whole.params_t(), "{loss:?}, step {step}");
        }
    }
}

/// A learning rate that blows up training stops it with a clear error and keeps
/// the last good (finite) parameters.
#[test]
fn divergence_stops_training_and_keeps_the_last_good_parameters() {
    let mut config = FlowConfig::defaults(FlowKind::Radial);
    config.family = Family::Sinh;
    config.stack = 4;
    let mut rng = Rng::seeded(0);
    let model = config.build::<f64>(2, &mut rng).unwrap();
    let settings = TrainSettings {
        batch: 64,
        learning_rate: 1e12,
        seed: 0,
        loss: Loss::ForwardKl,
        threads: 1,
    };
    let mut trainer = CpuTrainer::<f32>::new(model, Target::Moons, settings).unwrap();
    let mut error = None;
    for _ in 0..200 {
        if let Err(e) = trainer.step() {
            error = Some(e);
            break;
        }
    }
    let Some(TrainError::NonFinite { step }) = error else {
        panic!("training at lr 1e12 should diverge")
    };
    assert_eq!(trainer.steps_done(), step - 1);
    let model = trainer.model();
    assert!(model.as_flow().params().iter().all(|p| p.is_finite()));
    let message = TrainError::NonFinite { step }.to_string();
    assert!(message.contains("diverged") && message.contains("learning rate"));
}

#[test]
fn trainer_refuses_mismatched_settings() {
    let mut rng = Rng::seeded(0);
    let model = FlowConfig::defaults(FlowKind::Radial)
        .build::<f64>(2, &mut rng)
        .unwrap();
    let settings = |loss, lr| TrainSettings {
        batch: 8,
        learning_rate: lr,
        seed: 0,
        loss,
        threads: 1,
    };
    let err =
        |target, loss, lr| CpuTrainer::<f32>::new(model.clone(), target, settings(loss, lr)).err();
    assert_eq!(
        err(Target::Poly1d, Loss::ReverseKl, 1e-3),
        Some(SetupError::Dimension {
            flow: 2,
            target: "poly1d",
            target_dim: 1
        })
    );
    assert_eq!(
        err(Target::TwoMoonsEnergy, Loss::ForwardKl, 1e-3),
        Some(SetupError::NoSampler("twomoons-energy"))
    );
    assert_eq!(
        err(Target::Moons, Loss::ReverseKl, 1e-3),
        Some(SetupError::NoDensityGradient("moons"))
    );
    assert!(matches!(
        err(Target::Moons, Loss::ForwardKl, -1.0),
        Some(SetupError::LearningRate { .. })
    ));
    // the message a person reads
    let message = err(Target::TwoMoonsEnergy, Loss::ForwardKl, 1e-3).map(|e| e.to_string());
    assert_eq!(
        message.as_deref(),
        Some("target 'twomoons-energy' has no sampler: train it by reverse KL")
    );
    // Finite in f64 but infinite in f32: refused up front, not found as NaN later.
    let mut rng = Rng::seeded(0);
    let model = FlowConfig::defaults(FlowKind::Radial)
        .build::<f64>(2, &mut rng)
        .unwrap();
    let too_big = TrainSettings {
        batch: 8,
        learning_rate: 1e39,
        seed: 0,
        loss: Loss::ForwardKl,
        threads: 1,
    };
    let e = CpuTrainer::<f32>::new(model, Target::Moons, too_big).err();
    assert_eq!(
        e,
        Some(SetupError::LearningRate {
            precision: "f32",
            value: 1e39
        })
    );
}
