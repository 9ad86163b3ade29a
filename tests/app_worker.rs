//! The app with its CPU runs in workers (`worker=on` in a link; natively a
//! thread, in a browser a Web Worker, the same code either side): the
//! playground plays, redraws as the parameters come, pauses, steps one step
//! at a time and stays where it is when paused; the lab trains and measures
//! its runs there. Frames are run with short sleeps between them, as the
//! replies come back asynchronously.
#![cfg(all(feature = "app", not(target_arch = "wasm32")))]

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use flowplay::app::PlaygroundApp;
use flowplay::app::playground::picture::{grid_size, sharp_size};
use flowplay::app::playground::session::{Session, Status};
use std::time::{Duration, Instant};

fn harness(query: &'static str) -> Harness<'static, PlaygroundApp> {
    Harness::builder()
        .with_size([1280.0, 800.0])
        .wgpu()
        .build_eframe(move |_cc| PlaygroundApp::from_link(query))
}

fn session<'a>(h: &'a Harness<'static, PlaygroundApp>) -> &'a Session {
    h.state().playground().session().expect("a run")
}

/// Runs frames (a few milliseconds apart) until `done` holds; fails after a
/// minute without it.
fn frames_until(
    h: &mut Harness<'static, PlaygroundApp>,
    what: &str,
    done: impl Fn(&Harness<'static, PlaygroundApp>) -> bool,
) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !done(h) {
        assert!(Instant::now() < give_up, "gave up waiting for {what}");
        h.run_steps(1);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_playground_plays_pauses_and_steps_with_its_run_in_a_worker() {
    let mut h = harness("target=rings&flow=radial&stack=4&batch=64&spf=8&worker=on");
    h.run_steps(2);
    let title = h.state().playground().title().expect("a title");
    assert!(title.contains("| CPU worker |"), "{title}");
    assert!(
        session(&h).device().contains("thread"),
        "{}",
        session(&h).device()
    );
    let first_picture = session(&h).picture_version;
    h.get_by_label("Play").click();
    frames_until(&mut h, "300 steps", |h| session(h).steps_done() >= 300);
    let s = session(&h);
    assert_eq!(
        s.losses.len(),
        s.steps_done(),
        "a loss for every step heard"
    );
    let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
    let first = mean(&s.losses[..20]);
    let last = mean(&s.losses[s.losses.len() - 20..]);
    assert!(
        last < first - 0.1,
        "the loss did not fall: {first} -> {last}"
    );
    assert!(
        s.picture_version > first_picture,
        "the views follow the worker's parameters"
    );
    let (_, model) = s.model().expect("the model shown");
    assert!(s.picture.model.is_some());
    assert_eq!(model.as_flow().n_params(), s.n_params);
    // pause: the steps stop (those in flight come in) and stay stopped
    h.get_by_label("Pause").click();
    h.run_steps(2);
    std::thread::sleep(Duration::from_millis(300));
    h.run_steps(2);
    let paused_at = session(&h).steps_done();
    std::thread::sleep(Duration::from_millis(300));
    h.run_steps(2);
    assert_eq!(
        session(&h).steps_done(),
        paused_at,
        "a paused run trained on"
    );
    assert_eq!(session(&h).status, Status::Paused);
    // one step at a time
    h.get_by_label("Step").click();
    frames_until(&mut h, "the single step", |h| {
        session(h).steps_done() == paused_at + 1
    });
    std::thread::sleep(Duration::from_millis(200));
    h.run_steps(2);
    assert_eq!(
        session(&h).steps_done(),
        paused_at + 1,
        "one step, not more"
    );
    // the worker draws the stepped model's views (a reply or two later)
    frames_until(&mut h, "the stepped model's views", |h| {
        let drawn = session(h).picture.model.as_ref().map(|(step, _)| *step);
        drawn == Some(paused_at + 1)
    });
    // every picture shown was drawn by the worker, none on the page's thread,
    // and it measured the metrics with them (paused, every drawing's step)
    let s = session(&h);
    let last = s.metrics.last().expect("metrics");
    assert_eq!(last.step, paused_at + 1, "{:?}", s.metrics);
    assert!(s.metrics.iter().all(|m| m.held_out_nll.is_some()));
    assert!(
        s.pictures_from_worker() >= 3,
        "{}",
        s.pictures_from_worker()
    );
    assert_eq!(s.picture_version as usize, s.pictures_from_worker());
}

/// A paused run whose view cannot be drawn finer (a wide coupling flow:
/// its sharpened size is its training size) asks its worker for one
/// picture and then rests, rather than asking for the same one again and
/// again.
#[test]
fn a_paused_run_in_a_worker_rests_when_its_view_cannot_be_finer() {
    let mut h = harness("target=moons&flow=coupling&stack=1&layers=8&width=128&worker=on");
    // the premise: this flow's paused view is drawn at its training size
    let (_, model) = session(&h).model().expect("a model");
    assert_eq!(sharp_size(&model), grid_size(&model));
    frames_until(&mut h, "the first picture", |h| {
        session(h).pictures_from_worker() >= 1 && !session(h).awaiting_worker()
    });
    for _ in 0..20 {
        h.run_steps(1);
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = session(&h);
    assert_eq!(s.pictures_from_worker(), 1);
    assert!(!s.wants_frame());
    assert!(!s.awaiting_worker());
}

/// "Layer by layer" of a run in a worker: the worker draws each cut (the
/// page's thread pushes nothing through the flow), and each is the picture
/// the page would have drawn of that cut.
#[test]
fn the_layer_window_of_a_run_in_a_worker_has_its_cuts_drawn_there() {
    use flowplay::app::playground::layers::SAMPLES_SEED;
    use flowplay::app::playground::picture::cpu_picture_at;
    use flowplay::rng::Rng;
    let mut h = harness("target=rings&flow=radial&stack=8&batch=64&worker=on");
    for k in 1..=3 {
        h.get_by_label("Step").click();
        frames_until(&mut h, "a step", |h| session(h).steps_done() == k);
    }
    frames_until(&mut h, "the stepped views", |h| {
        let s = session(h);
        s.steps_done() == 3 && s.picture.model.as_ref().is_some_and(|(step, _)| *step == 3)
    });
    h.get_by_label("Layer by layer").click();
    frames_until(&mut h, "the picture at k = N", |h| {
        h.state()
            .playground()
            .layers()
            .is_some_and(|l| l.picture().is_some())
    });
    let playground = h.state().playground();
    let layers = playground.layers().expect("the window");
    assert_eq!(layers.scrubber.k, 8);
    let main = playground.session().expect("a run").picture.log_q.clone();
    assert_eq!(layers.picture().expect("k = N").log_q, main);
    let shown = playground.session().expect("a run").picture.model.clone();
    let (step, model) = shown.expect("the model shown");
    h.get_by_role_and_label(eframe::egui::accesskit::Role::Slider, "maps applied")
        .set_value_accesskit(2.0);
    frames_until(&mut h, "the picture at k = 2", |h| {
        h.state()
            .playground()
            .layers()
            .is_some_and(|l| l.scrubber.k == 2 && l.picture().is_some())
    });
    let drawn = h.state().playground().layers().unwrap().picture().unwrap();
    let cut = model.prefix(2).expect("a cut");
    let expected = cpu_picture_at(cut, step, &mut Rng::seeded(SAMPLES_SEED), drawn.n);
    assert_eq!(drawn.log_q, expected.log_q);
    assert_eq!(drawn.samples, expected.samples);
    assert_eq!(drawn.lines, expected.lines);
    assert_ne!(drawn.log_q, main);
    // both cuts came from the worker
    assert!(session(&h).cuts_from_worker() >= 2);
    // a cut asked for just before a Reset may never come; the new run's do
    h.get_by_role_and_label(eframe::egui::accesskit::Role::Slider, "maps applied")
        .set_value_accesskit(5.0);
    h.run_steps(2);
    h.get_by_label("Reset").click();
    frames_until(&mut h, "a cut of the new run", |h| {
        h.state()
            .playground()
            .layers()
            .is_some_and(|l| l.picture().is_some())
            && session(h).cuts_from_worker() >= 1
    });
}

#[test]
fn the_lab_trains_and_measures_its_runs_in_workers() {
    let mut h = harness("lab=phi4&L=4&m2=-4&lambda=2&layers=4&batch=32&worker=on");
    h.run_steps(2);
    let lab = h.state().lab().expect("the lab");
    assert!(lab.title().ends_with("| CPU worker"), "{}", lab.title());
    h.get_by_label("Play").click();
    frames_until(&mut h, "two measurements", |h| {
        h.state()
            .lab()
            .is_some_and(|lab| lab.runs.iter().all(|r| r.ess.len() >= 2))
    });
    let lab = h.state().lab().expect("the lab");
    for run in &lab.runs {
        // measured exactly at the measurement steps (every 20), each once
        assert!(
            run.ess.iter().all(|&(step, _)| step % 20 == 0),
            "{:?}",
            run.ess
        );
        assert!(run.ess.windows(2).all(|w| w[0].0 < w[1].0), "{:?}", run.ess);
        assert!(run.estimates.is_some());
        assert!(run.stopped.is_none(), "{:?}", run.stopped);
        assert!(run.host.in_worker());
    }
}

#[test]
fn a_link_splits_the_labs_steps_over_several_workers() {
    let mut h = harness("lab=phi4&L=4&m2=-4&lambda=2&layers=4&batch=32&worker=on&workers=3");
    h.run_steps(2);
    h.get_by_label("Play").click();
    frames_until(&mut h, "two measurements", |h| {
        h.state()
            .lab()
            .is_some_and(|lab| lab.runs.iter().all(|r| r.ess.len() >= 2))
    });
    // the address keeps the link's choice, so a reload splits again
    let address = h.state().query(&h.ctx);
    assert!(address.contains("workers=3"), "{address}");
    let lab = h.state().lab().expect("the lab");
    for run in &lab.runs {
        assert!(run.stopped.is_none(), "{:?}", run.stopped);
        assert!(run.host.in_worker());
        assert!(
            run.host.device.contains("+ 2 helpers"),
            "{}",
            run.host.device
        );
    }
}

#[test]
fn a_link_with_a_bad_number_of_workers_says_so() {
    let mut h = harness("target=rings&flow=radial&stack=4&workers=12");
    h.run_steps(2);
    let said = h.query_all_by(|node| {
        node.value()
            .or(node.label())
            .is_some_and(|text| text.contains("workers=12 is not a number of workers from 1 to 8"))
    });
    assert!(said.count() > 0, "no word about workers=12");
}
