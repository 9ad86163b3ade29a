//! Training in a worker (`app::host::worker`): natively the worker is a
//! thread running the same code as the browser's Web Worker, its messages in
//! the same wire form. A run there must give the page the same losses, step
//! for step, as the same run trained on the page's thread, keep its
//! checkpoints, take hand edits, stop on divergence, and survive a worker
//! that breaks.

use flowplay::app::host::worker::core::{Helper, WorkerCore};
use flowplay::app::host::worker::protocol::{
    DrawCut, DrawJob, Drawn, DrawnViews, FromWorker, MeasureJob, PartsDone, PartsJob, Sampled,
    ToWorker, Trained, WorkerSpec, target_from_json, target_to_json,
};
use flowplay::app::host::worker::{self, Channel};
use flowplay::app::host::{CpuReason, HostSpec, TrainerHost};
use flowplay::app::playground::picture::{PictureJob, cpu_picture_from, latent_samples};
use flowplay::flow::{FlowConfig, FlowKind, FlowModel};
use flowplay::rng::Rng;
use flowplay::target::{ImageDensity, Target};
use flowplay::train::metrics::{ModelMeasures, model_measures};
use flowplay::train::{Loss, TrainSettings};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

type Host = TrainerHost<PictureJob>;

/// A radial flow of 8 cubic maps on the rings, batch 64.
fn rings_spec(learning_rate: f64) -> HostSpec {
    let mut config = FlowConfig::defaults(FlowKind::Radial);
    config.stack = 8;
    let model = config.build(2, &mut Rng::seeded(3)).expect("a radial flow");
    HostSpec {
        model,
        target: Target::Rings,
        settings: TrainSettings {
            batch: 64,
            learning_rate,
            seed: 7,
            loss: Loss::ForwardKl,
            threads: 1,
        },
        fixed_centre: false,
    }
}

fn on_the_page(spec: HostSpec) -> Host {
    worker::set_wanted(false);
    let host = Host::new(spec, Err(CpuReason::Chosen)).expect("a CPU run");
    assert!(!host.in_worker());
    host
}

fn in_a_worker(spec: HostSpec) -> Host {
    worker::set_wanted(true);
    let host = Host::new(spec, Err(CpuReason::Chosen)).expect("a CPU run");
    worker::set_wanted(false);
    assert!(host.in_worker(), "the run should train in a worker");
    assert!(host.device.contains("thread"), "{}", host.device);
    host
}

/// Frames of a run in a worker until it has been heard to reach `step`
/// (granting no further): the (step, loss) pairs on the way, and whether
/// fresh parameters came with the last reply.
fn worker_frames_to(host: &mut Host, step: usize) -> (Vec<(usize, f64)>, bool) {
    let mut losses = Vec::new();
    let mut fresh = false;
    let give_up = Instant::now() + Duration::from_secs(120);
    while host.steps_done() < step {
        assert!(
            Instant::now() < give_up,
            "the worker stalled at step {}",
            host.steps_done()
        );
        let progress = host.frame(step - host.steps_done(), Duration::from_millis(14), None);
        assert!(progress.stopped.is_none(), "{:?}", progress.stopped);
        fresh = progress.fresh_model;
        losses.extend(progress.losses);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(host.steps_done(), step, "the worker went past its grant");
    (losses, fresh)
}

fn page_frames_to(host: &mut Host, step: usize) -> Vec<(usize, f64)> {
    let mut losses = Vec::new();
    while host.steps_done() < step {
        let progress = host.frame(step - host.steps_done(), Duration::from_secs(10), None);
        assert!(progress.stopped.is_none(), "{:?}", progress.stopped);
        losses.extend(progress.losses);
    }
    losses
}

#[test]
fn a_worker_gives_the_same_losses_as_the_page_step_for_step() {
    let mut page = on_the_page(rings_spec(1e-2));
    let mut worker = in_a_worker(rings_spec(1e-2));
    let expected = page_frames_to(&mut page, 120);
    let (got, fresh) = worker_frames_to(&mut worker, 120);
    assert_eq!(got.len(), 120);
    assert_eq!(got, expected, "the worker's losses differ from the page's");
    // the parameters came back with the last step and equal the page's
    assert!(fresh);
    let (step, model) = worker.model().expect("the worker's model");
    assert_eq!(step, 120);
    let (_, page_model) = page.model().expect("the page's model");
    assert_eq!(model.as_flow().params(), page_model.as_flow().params());
    // both kept the checkpoints at steps 10, 50 and 100 (the last is 100)
    assert_eq!(worker.checkpoint_step(), Some(100));
    assert_eq!(page.checkpoint_step(), Some(100));
    assert_eq!(
        worker.checkpoint().map(|c| c.1.as_flow().params().to_vec()),
        page.checkpoint().map(|c| c.1.as_flow().params().to_vec()),
    );
}

/// A coupling flow on the moons, batch 96 (8 parts of 12 rows).
fn moons_coupling_spec() -> HostSpec {
    let mut config = FlowConfig::defaults(FlowKind::Coupling);
    config.layers = 2;
    config.width = 16;
    let model = config
        .build(2, &mut Rng::seeded(4))
        .expect("a coupling flow");
    HostSpec {
        model,
        target: Target::Moons,
        settings: TrainSettings {
            batch: 96,
            learning_rate: 1e-2,
            seed: 11,
            loss: Loss::ForwardKl,
            threads: 1,
        },
        fixed_centre: false,
    }
}

#[test]
fn steps_split_over_several_workers_give_the_same_numbers_as_the_page() {
    let specs: [fn() -> HostSpec; 2] = [|| rings_spec(1e-2), moons_coupling_spec];
    for spec in specs {
        let mut page = on_the_page(spec());
        let expected = page_frames_to(&mut page, 60);
        let (_, page_model) = page.model().expect("the page's model");
        for workers in [2, 3, 5] {
            worker::set_workers(workers);
            let mut split = in_a_worker(spec());
            worker::set_workers(1);
            let helpers = workers - 1;
            assert!(
                split.device.contains(&format!("+ {helpers} helper")),
                "{}",
                split.device
            );
            let (got, fresh) = worker_frames_to(&mut split, 60);
            assert_eq!(got, expected, "{workers} workers");
            assert!(fresh);
            let (step, model) = split.model().expect("the split run's model");
            assert_eq!(step, 60);
            assert_eq!(model.as_flow().params(), page_model.as_flow().params());
        }
    }
}

/// A batch of 3 rows is 3 parts: split over 5 workers, some get none (and
/// are not asked), and the run is still the page's.
#[test]
fn a_batch_with_fewer_parts_than_workers_splits_too() {
    let small = || {
        let mut spec = rings_spec(1e-2);
        spec.settings.batch = 3;
        spec
    };
    let mut page = on_the_page(small());
    let expected = page_frames_to(&mut page, 30);
    worker::set_workers(5);
    let mut split = in_a_worker(small());
    worker::set_workers(1);
    let (got, _) = worker_frames_to(&mut split, 30);
    assert_eq!(got, expected);
}

#[test]
fn a_split_run_takes_hand_edits_and_a_new_learning_rate() {
    let mut page = on_the_page(rings_spec(1e-2));
    worker::set_workers(3);
    let mut split = in_a_worker(rings_spec(1e-2));
    worker::set_workers(1);
    page_frames_to(&mut page, 20);
    worker_frames_to(&mut split, 20);
    let (_, model) = page.model().expect("a model");
    let mut params = model.as_flow().params().to_vec();
    params[1] -= 0.125;
    let edited: FlowModel<f64> = model.with_params(params).expect("same structure");
    page.set_model(&edited).expect("the page takes the edit");
    split.set_model(&edited).expect("the workers take the edit");
    page.set_learning_rate(3e-3);
    split.set_learning_rate(3e-3);
    let expected = page_frames_to(&mut page, 45);
    let (got, _) = worker_frames_to(&mut split, 45);
    assert_eq!(got, expected);
}

/// A helper as a test sees it: the messages its lead sent.
#[derive(Clone, Default)]
struct Mailbox(Rc<RefCell<Vec<ToWorker>>>);

impl Helper for Mailbox {
    fn post(&self, message: &ToWorker) -> Result<(), String> {
        self.0.borrow_mut().push(message.clone());
        Ok(())
    }
}

/// The lead's core with one helper whose mail the test answers by hand:
/// the step waits for the answer, a message that comes meanwhile waits for
/// the step, and an answer that does not fit stops the run with a message.
#[test]
fn a_split_step_waits_for_its_helper_and_so_do_the_pages_messages() {
    let mut spec = WorkerSpec::from_host(&rings_spec(1e-2));
    spec.helpers = 1;
    let mailbox = Mailbox::default();
    let mut lead = WorkerCore::new();
    lead.set_helpers(vec![Box::new(mailbox.clone())]);
    lead.handle(ToWorker::Start(spec.clone()));
    let replies = lead.take_replies();
    let [FromWorker::Trained(started)] = &replies[..] else {
        panic!("the answer to the start: {replies:?}");
    };
    assert_eq!(started.helpers, Some(1), "the answer names its helpers");
    // the helper was told to build the same trainer, without helpers
    let mut helper = WorkerCore::new();
    let start = mailbox.0.borrow_mut().remove(0);
    assert_eq!(
        start,
        ToWorker::Start(WorkerSpec {
            helpers: 0,
            ..spec.clone()
        })
    );
    helper.handle(start);
    helper.take_replies();
    lead.handle(ToWorker::Train { until: 2, base: 0 });
    lead.work(Duration::from_secs(1));
    assert!(lead.awaiting_helpers());
    assert!(!lead.has_work());
    let job = mailbox.0.borrow_mut().remove(0);
    let ToWorker::Parts(PartsJob { parts, .. }) = &job else {
        panic!("a share of the step: {job:?}");
    };
    assert_eq!(parts.clone(), 4..8, "the helper takes the second half");
    // a new learning rate waits for the step in flight
    lead.handle(ToWorker::SetLearningRate(1e-3));
    assert!(lead.take_replies().is_empty());
    helper.handle(job);
    let answer = helper.take_replies().remove(0);
    let message = answer.for_lead().expect("an answer for the lead");
    lead.handle(message);
    assert!(!lead.awaiting_helpers());
    // the step is taken, then the learning rate heard: as a lone worker's
    // stretch ends before it hears, the step goes out first
    let replies = lead.take_replies();
    let [FromWorker::Trained(trained)] = &replies[..] else {
        panic!("the first step: {replies:?}");
    };
    assert_eq!((trained.losses.len(), trained.steps_done), (1, 1));
    lead.handle(ToWorker::Train { until: 2, base: 0 });
    assert!(lead.take_replies().is_empty(), "nothing more to say");
    // the second step; this time the answer does not fit
    lead.work(Duration::from_secs(1));
    let ToWorker::Parts(job) = mailbox.0.borrow_mut().remove(0) else {
        panic!("a share of the second step");
    };
    lead.handle(ToWorker::PartsDone(PartsDone {
        step: job.step,
        first: 4,
        losses: vec![0.5; 4],
        grads: vec![0.0; 3],
    }));
    let replies = lead.take_replies();
    let [FromWorker::Failed(why)] = &replies[..] else {
        panic!("a failure: {replies:?}");
    };
    assert!(why.contains("a helper worker broke"), "{why}");
    assert!(!lead.awaiting_helpers());
}

#[test]
fn a_hand_edit_and_a_new_learning_rate_reach_the_worker() {
    let mut page = on_the_page(rings_spec(1e-2));
    let mut worker = in_a_worker(rings_spec(1e-2));
    page_frames_to(&mut page, 20);
    worker_frames_to(&mut worker, 20);
    let (_, model) = page.model().expect("a model");
    let mut params = model.as_flow().params().to_vec();
    params[0] += 0.25;
    let edited: FlowModel<f64> = model.with_params(params).expect("same structure");
    page.set_model(&edited).expect("the page takes the edit");
    worker
        .set_model(&edited)
        .expect("the worker takes the edit");
    // the page sees the edit at once
    let (step, shown) = worker.model().expect("a model");
    assert_eq!(step, 20);
    assert_eq!(shown.as_flow().params(), edited.as_flow().params());
    page.set_learning_rate(3e-3);
    worker.set_learning_rate(3e-3);
    let expected = page_frames_to(&mut page, 40);
    let (got, _) = worker_frames_to(&mut worker, 40);
    assert_eq!(got, expected);
}

#[test]
fn an_edit_while_steps_are_in_flight_undoes_them_and_the_count_follows() {
    let mut worker = in_a_worker(rings_spec(1e-2));
    worker_frames_to(&mut worker, 5);
    // grant many steps, then edit before hearing them
    let _ = worker.frame(500, Duration::ZERO, None);
    std::thread::sleep(Duration::from_millis(30));
    let (step, model) = worker.model().expect("a model");
    worker.set_model(&model).expect("the edit");
    let heard = worker.steps_done();
    assert_eq!(step, heard);
    // the worker's replies about steps before the edit are passed over
    for _ in 0..40 {
        let progress = worker.frame(0, Duration::ZERO, None);
        assert!(progress.losses.is_empty(), "no losses of undone steps");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(worker.steps_done(), heard);
    let (losses, _) = worker_frames_to(&mut worker, heard + 3);
    let steps: Vec<usize> = losses.iter().map(|&(s, _)| s).collect();
    assert_eq!(steps, vec![heard + 1, heard + 2, heard + 3]);
}

#[test]
fn a_halt_stops_the_worker_short_of_its_grant() {
    a_halt_stops_workers_short_of_their_grant(1);
}

#[test]
fn a_halt_stops_split_steps_short_of_their_grant() {
    a_halt_stops_workers_short_of_their_grant(3);
}

fn a_halt_stops_workers_short_of_their_grant(workers: usize) {
    // a slow run: 64 maps a ray, batch 512 (milliseconds a step)
    let mut spec = rings_spec(1e-2);
    let mut config = FlowConfig::defaults(FlowKind::Radial);
    config.stack = 64;
    spec.model = config.build(2, &mut Rng::seeded(3)).expect("a radial flow");
    spec.settings.batch = 512;
    worker::set_workers(workers);
    let mut worker = in_a_worker(spec);
    worker::set_workers(1);
    let _ = worker.frame(2000, Duration::ZERO, None);
    std::thread::sleep(Duration::from_millis(100));
    let _ = worker.frame(0, Duration::ZERO, None);
    worker.halt();
    assert!(!worker.awaiting_worker() || worker.steps_done() < 2000);
    // whatever was in flight comes in; then nothing more
    std::thread::sleep(Duration::from_millis(300));
    let _ = worker.frame(0, Duration::ZERO, None);
    let halted_at = worker.steps_done();
    std::thread::sleep(Duration::from_millis(300));
    let _ = worker.frame(0, Duration::ZERO, None);
    assert_eq!(
        worker.steps_done(),
        halted_at,
        "the worker trained on after the halt"
    );
    assert!(
        halted_at < 2000,
        "the halt came after the whole grant: {halted_at}"
    );
    assert!(!worker.awaiting_worker());
    // the parameters it stopped at came back with the halt: the page's
    // model is the one at the step it heard
    let (model_step, _) = worker.model().expect("a model");
    assert_eq!(model_step, halted_at);
    // and goes on from there, each step heard once
    let (losses, _) = worker_frames_to(&mut worker, halted_at + 3);
    let steps: Vec<usize> = losses.iter().map(|&(s, _)| s).collect();
    assert_eq!(steps, vec![halted_at + 1, halted_at + 2, halted_at + 3]);
}

#[test]
fn a_diverging_run_in_a_worker_stops_and_goes_on_at_half_the_rate() {
    // a learning rate of 50 throws the parameters off at once
    let mut worker = in_a_worker(rings_spec(50.0));
    let give_up = Instant::now() + Duration::from_secs(120);
    let stopped = loop {
        assert!(Instant::now() < give_up, "the run never stopped");
        let progress = worker.frame(50, Duration::ZERO, None);
        if let Some(why) = progress.stopped {
            break why;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(!stopped.is_empty());
    let (step, lr) = worker.go_on_at_half_rate().expect("goes on");
    assert_eq!(lr, 25.0);
    assert!(step <= worker.steps_done());
}

#[test]
fn a_run_the_trainer_refuses_fails_at_once_in_a_worker_too() {
    let mut spec = rings_spec(1e-2);
    spec.settings.batch = 0;
    worker::set_wanted(true);
    let refused = Host::new(spec, Err(CpuReason::Chosen));
    worker::set_wanted(false);
    assert!(refused.is_err());
}

/// A worker that breaks as soon as it is asked anything.
struct Broken;

impl Channel for Broken {
    fn post(&self, _: &ToWorker) {}
    fn take(&self) -> Vec<FromWorker> {
        vec![FromWorker::Failed("out of memory".into())]
    }
    fn place(&self) -> &'static str {
        "broken worker"
    }
}

/// A worker that could start none of the helpers asked for: it answers the
/// start saying so, and trains alone.
struct Alone(std::cell::Cell<bool>);

impl Channel for Alone {
    fn post(&self, _: &ToWorker) {}
    fn take(&self) -> Vec<FromWorker> {
        if self.0.replace(true) {
            return Vec::new();
        }
        vec![FromWorker::Trained(Trained {
            helpers: Some(0),
            ..Trained::default()
        })]
    }
    fn place(&self) -> &'static str {
        "lone worker"
    }
}

#[test]
fn the_device_label_follows_the_helpers_a_worker_could_start() {
    worker::set_workers(3);
    let host = Host::in_worker_at(rings_spec(1e-2), Box::new(Alone(Default::default())));
    worker::set_workers(1);
    let mut host = host.expect("a run");
    assert_eq!(host.device, "CPU (lone worker + 2 helpers, f32)");
    let _ = host.frame(0, Duration::ZERO, None);
    assert_eq!(host.device, "CPU (lone worker, f32)");
}

#[test]
fn a_broken_worker_is_reported_and_the_run_goes_on_in_the_page() {
    let mut host = Host::in_worker_at(rings_spec(1e-2), Box::new(Broken)).expect("a run");
    let progress = host.frame(10, Duration::from_secs(1), None);
    let why = progress.stopped.expect("the failure is reported");
    assert!(why.contains("out of memory"), "{why}");
    assert!(why.contains("goes on in the page"), "{why}");
    assert!(!host.in_worker());
    assert!(host.device.starts_with("CPU ("), "{}", host.device);
    let losses = page_frames_to(&mut host, 5);
    assert_eq!(losses.len(), 5);
}

/// A drawing of the views at n x n from `latent`, measured where asked.
fn draw(latent: &[f32], n: usize, measure: Option<MeasureJob>) -> DrawJob {
    DrawJob {
        latent: latent.to_vec(),
        n,
        measure,
        cut: None,
    }
}

/// A drawing with every kind of view: a 2 x 2 density (one value not
/// finite), samples, two lines, a centre and scales.
fn drawn_example() -> Drawn {
    use glam::vec2;
    Drawn {
        steps_done: 7,
        generation: 3,
        params: vec![0.5, -1e-300],
        views: DrawnViews {
            n: 2,
            log_q: vec![-1.0, f32::NEG_INFINITY, 0.25, -3.5],
            samples: vec![vec2(0.5, -0.5), vec2(f32::MAX, 1.0)],
            lines: vec![
                vec![(vec2(1.0, 2.0), 0.1), (vec2(1.5, 2.5), -0.2)],
                vec![(vec2(-1.0, 0.0), 0.0)],
            ],
            center: Some(vec2(-0.5, -1.0)),
            scale: Some(vec2(1.0, 2.0)),
        },
        measures: Some(ModelMeasures {
            held_out_nll: Some(1.5),
            reverse_kl: None,
            ess: Some(0.25),
        }),
        cut: None,
        seconds: 0.04,
    }
}

/// The page asks its worker to draw the views: the picture that comes back
/// (through the wire) is the one the page's thread would have drawn of the
/// same parameters with the same latent points, and shows the run's step.
#[test]
fn a_worker_draws_the_views_the_page_would_draw() {
    // a run that starts at step 100 (an imported model's): the worker's
    // measures are seeded by the run's step, as the page's are
    worker::set_wanted(true);
    let mut worker =
        Host::at_step(rings_spec(1e-2), Err(CpuReason::Chosen), 100).expect("a CPU run");
    worker::set_wanted(false);
    assert!(worker.in_worker());
    worker_frames_to(&mut worker, 130);
    let latent = latent_samples(&mut Rng::seeded(11));
    let held_out = Target::Rings
        .sample(100, &mut Rng::seeded(12))
        .expect("rings samples");
    let measure = MeasureJob {
        held_out: held_out.clone(),
        reverse_samples: 50,
        base: 0,
    };
    assert!(worker.draw_in_worker(draw(&latent, 32, Some(measure))));
    assert!(worker.drawing_in_worker());
    // a paused page keeps looking for the drawing
    assert!(worker.awaiting_worker());
    // one drawing at a time
    assert!(!worker.draw_in_worker(draw(&latent, 32, None)));
    let give_up = Instant::now() + Duration::from_secs(60);
    let (picture, seconds, measures) = loop {
        assert!(Instant::now() < give_up, "no drawing came");
        let progress = worker.frame(0, Duration::from_millis(14), None);
        if let Some(drawn) = progress.drawn {
            break (drawn.picture, drawn.seconds, drawn.measures);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(!worker.drawing_in_worker());
    assert!(!worker.awaiting_worker());
    assert!(seconds > 0.0);
    let (step, model) = worker.model().expect("the worker's model");
    assert_eq!(step, 130);
    let expected = cpu_picture_from(model.clone(), step, &latent, 32);
    // the metrics measured with it are the page's numbers for that step
    let rings = Target::Rings;
    let measured = model_measures(model.as_flow(), &held_out, Some(&rings), 50, 130);
    assert!(measured.held_out_nll.is_some());
    assert_eq!(measures, Some(measured));
    assert_eq!(picture.n, 32);
    assert_eq!(picture.log_q, expected.log_q);
    assert_eq!(picture.samples, expected.samples);
    assert_eq!(picture.lines, expected.lines);
    assert_eq!(
        (picture.center, picture.scale),
        (expected.center, expected.scale)
    );
    let (drawn_step, drawn_model) = picture.model.expect("the model drawn");
    assert_eq!(drawn_step, 130);
    assert_eq!(drawn_model.as_flow().params(), model.as_flow().params());
    // a page that trains in the frame draws itself: nothing to ask
    let mut page = on_the_page(rings_spec(1e-2));
    assert!(!page.draw_in_worker(draw(&latent, 32, None)));
}

/// The lab's measurement in a worker: samples asked for before more steps
/// are granted are pushed through the flow of the step the worker stopped
/// at, and are the samples the page's thread would have pushed.
#[test]
fn a_worker_pushes_samples_through_the_flow_it_stopped_at() {
    let mut worker = in_a_worker(rings_spec(1e-2));
    worker_frames_to(&mut worker, 20);
    let (step, model) = worker.model().expect("the worker's model");
    assert_eq!(step, 20);
    let mut rng = Rng::seeded(4);
    let latent: Vec<f64> = (0..2 * 64).map(|_| rng.normal()).collect();
    assert!(worker.sample_in_worker(latent.clone()));
    assert!(worker.sampling_in_worker());
    assert!(!worker.sample_in_worker(latent.clone()), "one at a time");
    // more steps granted at once: the samples still come from step 20
    let give_up = Instant::now() + Duration::from_secs(60);
    let samples = loop {
        assert!(Instant::now() < give_up, "no samples came");
        let progress = worker.frame(10, Duration::from_millis(14), None);
        if let Some(samples) = progress.sampled {
            break samples;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    assert_eq!(samples.step, 20);
    let (fields, log_q) = flowplay::phi4::estimates::flow_samples_from(model.as_flow(), &latent);
    assert_eq!(samples.fields, fields);
    assert_eq!(samples.log_q, log_q);
    assert_eq!(samples.log_q.len(), 64);
    // each sample is its own latent point pushed alone, with log q =
    // log N(z) - log det
    let flow = model.as_flow();
    for i in [0, 37, 63] {
        let z = &latent[2 * i..2 * i + 2];
        let (mut x, mut ld) = ([0.0; 2], [0.0; 1]);
        flow.x_from_z(z, &mut x, &mut ld);
        assert_eq!(&fields[2 * i..2 * i + 2], &x);
        let log_normal = -0.5 * (z[0] * z[0] + z[1] * z[1]) - std::f64::consts::TAU.ln();
        assert!((log_q[i] - (log_normal - ld[0])).abs() < 1e-12);
    }
}

/// A cut the run cannot draw (parameters of another structure, or more maps
/// than it has) comes back empty: the page is not left waiting, and the run
/// goes on.
#[test]
fn a_cut_that_does_not_fit_comes_back_empty() {
    let mut worker = in_a_worker(rings_spec(1e-2));
    worker_frames_to(&mut worker, 5);
    let (_, model) = worker.model().expect("a model");
    let params = model.as_flow().params().to_vec();
    let cuts = [
        DrawCut {
            params: vec![1.0; 3],
            maps: 2,
        },
        DrawCut { params, maps: 99 },
    ];
    for cut in cuts {
        let job = DrawJob {
            cut: Some(cut),
            ..draw(&latent_samples(&mut Rng::seeded(1)), 16, None)
        };
        assert!(worker.draw_in_worker(job));
        let give_up = Instant::now() + Duration::from_secs(60);
        let drawn = loop {
            assert!(Instant::now() < give_up, "no drawing came");
            let progress = worker.frame(0, Duration::from_millis(14), None);
            assert!(progress.stopped.is_none(), "{:?}", progress.stopped);
            if let Some(drawn) = progress.drawn {
                break drawn;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        assert_eq!(drawn.picture.n, 0);
        assert!(drawn.picture.log_q.is_empty() && drawn.picture.samples.is_empty());
        assert!(!worker.drawing_in_worker());
    }
    worker_frames_to(&mut worker, 10);
}

/// A drawing asked before a hand edit shows the old parameters: it is
/// passed over, and the next one shows the edit.
#[test]
fn a_drawing_of_replaced_parameters_is_passed_over() {
    let mut worker = in_a_worker(rings_spec(1e-2));
    worker_frames_to(&mut worker, 10);
    let latent = latent_samples(&mut Rng::seeded(5));
    assert!(worker.draw_in_worker(draw(&latent, 16, None)));
    let (_, model) = worker.model().expect("a model");
    let mut params = model.as_flow().params().to_vec();
    params[0] += 0.5;
    let edited = model.with_params(params).expect("same structure");
    worker.set_model(&edited).expect("the edit");
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut asked_again = false;
    let picture = loop {
        assert!(Instant::now() < give_up, "no drawing came");
        let progress = worker.frame(0, Duration::from_millis(14), None);
        if let Some(drawn) = progress.drawn {
            break drawn.picture;
        }
        if !worker.drawing_in_worker() && !asked_again {
            asked_again = worker.draw_in_worker(draw(&latent, 16, None));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(asked_again, "the drawing of the old parameters was shown");
    // (the worker holds the edit in its float32)
    let (_, shown) = picture.model.expect("the model drawn");
    let in_f32 = |m: &FlowModel<f64>| -> Vec<f32> {
        m.as_flow().params().iter().map(|&v| v as f32).collect()
    };
    assert_eq!(in_f32(&shown), in_f32(&edited));
}

#[test]
fn every_message_crosses_the_wire_unchanged() {
    let spec = WorkerSpec::from_host(&rings_spec(1e-2));
    let to = [
        ToWorker::Start(spec.clone()),
        ToWorker::Train {
            until: 42,
            base: -3,
        },
        ToWorker::SetLearningRate(0.0123),
        ToWorker::SetModel {
            generation: 2,
            params: vec![0.1, -2.5, 1e-300],
        },
        ToWorker::Parts(PartsJob {
            step: 9,
            parts: 3..5,
            params: vec![0.25, -1.5e-7],
            batch: vec![1.0, 2.0, f32::MAX, -0.0],
        }),
        ToWorker::PartsDone(PartsDone {
            step: 9,
            first: 3,
            losses: vec![0.5, f64::INFINITY],
            grads: vec![1.0, -2.0, 3.5, f32::MIN_POSITIVE],
        }),
        ToWorker::HelperFailed("out of memory".into()),
        ToWorker::Sample {
            latent: vec![0.5, -1e-300, 2.0],
        },
        ToWorker::Draw(DrawJob {
            latent: vec![0.5, -1.25, 3.0],
            n: 96,
            measure: None,
            cut: None,
        }),
        ToWorker::Draw(DrawJob {
            latent: vec![1.0, 2.0],
            n: 48,
            measure: Some(MeasureJob {
                held_out: vec![0.25, -0.5, 1e-300, 4.0],
                reverse_samples: 500,
                base: -3,
            }),
            cut: None,
        }),
        ToWorker::Draw(DrawJob {
            latent: vec![1.0, 2.0],
            n: 48,
            measure: Some(MeasureJob {
                held_out: vec![0.25, -0.5],
                reverse_samples: 0,
                base: 7,
            }),
            cut: Some(DrawCut {
                params: vec![3.0, -1e-300, 0.5],
                maps: 2,
            }),
        }),
        ToWorker::Draw(DrawJob {
            latent: vec![],
            n: 8,
            measure: None,
            cut: Some(DrawCut {
                params: vec![],
                maps: 0,
            }),
        }),
    ];
    for message in to {
        assert_eq!(ToWorker::from_wire(message.to_wire()), Ok(message));
    }
    let from = [
        FromWorker::Trained(Trained {
            losses: vec![1.5, -0.25],
            steps_done: 12,
            generation: 1,
            params: Some(vec![3.0, 4.0]),
            error: Some("NaN".into()),
            seconds: 0.5,
            helpers: Some(2),
        }),
        FromWorker::Trained(Trained::default()),
        FromWorker::Failed("broken".into()),
        FromWorker::PartsDone(PartsDone {
            step: 1,
            first: 0,
            losses: vec![],
            grads: vec![],
        }),
        FromWorker::Sampled(Sampled {
            steps_done: 40,
            generation: 2,
            fields: vec![1.0, 2.0, 3.0, 4.0],
            log_q: vec![-0.5, f64::NEG_INFINITY],
        }),
        FromWorker::Drawn(Box::new(drawn_example())),
        FromWorker::Drawn(Box::new(Drawn {
            views: DrawnViews {
                center: None,
                scale: None,
                lines: vec![],
                ..drawn_example().views
            },
            measures: None,
            cut: Some(3),
            ..drawn_example()
        })),
    ];
    for message in from {
        assert_eq!(FromWorker::from_wire(message.to_wire()), Ok(message));
    }
    // a drawing whose numbers do not fit its counts is refused, not misread
    let mut short = FromWorker::Drawn(Box::new(drawn_example())).to_wire();
    short.floats.as_mut().expect("numbers").pop();
    assert!(FromWorker::from_wire(short).is_err());
    let mut huge = FromWorker::Drawn(Box::new(drawn_example())).to_wire();
    huge.json["n"] = serde_json::json!(u64::MAX);
    assert!(FromWorker::from_wire(huge).is_err());
    // the model and settings come back exactly
    let back = spec.to_host().expect("the spec rebuilds");
    let original = rings_spec(1e-2);
    assert_eq!(
        back.model.as_flow().params(),
        original.model.as_flow().params()
    );
    assert_eq!(
        back.settings,
        TrainSettings {
            threads: 1,
            ..original.settings
        }
    );
    // a seed beyond 2^53 survives (it travels as text)
    let mut big = spec;
    big.seed = u64::MAX - 1;
    assert_eq!(
        ToWorker::from_wire(ToWorker::Start(big.clone()).to_wire()),
        Ok(ToWorker::Start(big))
    );
}

#[test]
fn every_kind_of_target_crosses_the_wire_exactly() {
    let weights: Vec<f64> = (0..12).map(|k| (k % 5) as f64 * 0.37).collect();
    let image = ImageDensity::from_weights(4, 3, &weights).expect("an image");
    let mut targets: Vec<Target> = Target::NAMES
        .iter()
        .map(|n| Target::parse(n).expect("a built-in target"))
        .collect();
    targets.push(Target::RingMixture { rings: 5 });
    targets.push(Target::parse("phi4:L=6,m2=-4.125,lambda=0.1").expect("phi^4"));
    targets.push(Target::Image(image));
    for target in targets {
        let back = target_from_json(&target_to_json(&target)).expect("rebuilds");
        assert_eq!(format!("{back:?}"), format!("{target:?}"));
    }
    assert!(
        target_from_json(
            &serde_json::json!({"image": {"width": 2, "height": 1, "cdf": [0.7, 0.2]}})
        )
        .is_err()
    );
    assert!(target_from_json(&serde_json::json!({"name": "nonsense"})).is_err());
}
