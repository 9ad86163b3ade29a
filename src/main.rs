//! The playground's entry points: a native window (`cargo run --release
//! --bin playground`) or the web page (built by Trunk, see `index.html`).

#[cfg(not(target_arch = "wasm32"))]
fn main() -> eframe::Result {
    let options = eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_title("Flow Playground")
            .with_inner_size([1280.0, 800.0]),
        wgpu_options: flowplay::app::devices::wgpu_options(),
        ..Default::default()
    };
    eframe::run_native(
        "Flow Playground",
        options,
        Box::new(|cc| Ok(Box::new(flowplay::app::PlaygroundApp::new(cc)))),
    )
}

/// After a panic the canvas stops; put a readable message over it instead of
/// leaving a frozen page (the browser console keeps the full report).
#[cfg(target_arch = "wasm32")]
fn show_panics_in_the_page() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        let what = flowplay::app::host::worker::panic_message(info.payload());
        let place = info
            .location()
            .map(|l| format!(" ({}:{})", l.file(), l.line()))
            .unwrap_or_default();
        if let Some(crash) = eframe::web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.get_element_by_id("crash"))
        {
            crash.set_text_content(Some(&format!(
                "Flow Playground stopped on an internal error: {what}{place}. \
                 Reload the page to start again (Copy link keeps your settings in the address). \
                 Please report it with this message."
            )));
            let _ = crash.set_attribute("style", "display: flex");
        }
    }));
}

#[cfg(target_arch = "wasm32")]
fn main() {
    use eframe::wasm_bindgen::JsCast as _;
    // the same program started in a training worker: no window, it trains
    if flowplay::app::host::worker::web::in_worker() {
        flowplay::app::host::worker::web::serve();
        return;
    }
    show_panics_in_the_page();
    wasm_bindgen_futures::spawn_local(async {
        let Some(document) = eframe::web_sys::window().and_then(|w| w.document()) else {
            return;
        };
        let canvas = document
            .get_element_by_id("playground")
            .and_then(|e| e.dyn_into::<eframe::web_sys::HtmlCanvasElement>().ok());
        let loading = document.get_element_by_id("loading");
        let Some(canvas) = canvas else {
            if let Some(loading) = loading {
                loading.set_inner_html("The page is missing its canvas.");
            }
            return;
        };
        let started = eframe::WebRunner::new()
            .start(
                canvas,
                eframe::WebOptions {
                    wgpu_options: flowplay::app::devices::wgpu_options(),
                    ..Default::default()
                },
                Box::new(|cc| Ok(Box::new(flowplay::app::PlaygroundApp::new(cc)))),
            )
            .await;
        if let Some(loading) = loading {
            match started {
                Ok(()) => loading.remove(),
                Err(e) => loading.set_inner_html(&format!(
                    "The playground could not start: {}",
                    e.as_string().unwrap_or_else(|| "unknown error".into())
                )),
            }
        }
    });
}
