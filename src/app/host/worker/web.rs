//! A worker in the browser: a module Web Worker that instantiates this same
//! program (the page hands it the compiled module and the address of the
//! glue code Trunk wrote), whose start sees no window and serves
//! [`WorkerCore`] instead of drawing. Messages are plain objects: the fields
//! as JSON text, the parameters as a `Float64Array` beside them.

use super::core::WorkerCore;
use super::protocol::{FromWorker, ToWorker, Wire};
use super::{CHUNK, Channel};
use eframe::wasm_bindgen::closure::Closure;
use eframe::wasm_bindgen::{JsCast, JsValue};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The worker's first script: it loads the program from the address and
/// module the page sends first, keeps what arrives meanwhile, and hands that
/// to the program's own handler once it has installed it.
const BOOTSTRAP: &str = r#"
const early = [];
self.onmessage = async (event) => {
  self.onmessage = (e) => early.push(e.data);
  try {
    const glue = await import(event.data.glue);
    await glue.default({ module_or_path: event.data.module });
  } catch (e) {
    self.postMessage({ json: JSON.stringify({ kind: "failed", message: "the training worker could not start: " + e }) });
    return;
  }
  for (const data of early) self.onmessage({ data });
};
"#;

/// The page's end of a Web Worker.
pub struct WebChannel {
    worker: web_sys::Worker,
    inbox: Rc<RefCell<Vec<FromWorker>>>,
    script: String,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::ErrorEvent)>,
}

impl WebChannel {
    /// A worker running this program, or why there is none (the page then
    /// trains on its own thread).
    pub fn spawn() -> Result<Self, String> {
        let glue = glue_address().ok_or("the page does not name its program's script")?;
        let why = |e: JsValue| format!("{e:?}");
        let options = web_sys::BlobPropertyBag::new();
        options.set_type("text/javascript");
        let parts = js_sys::Array::of1(&JsValue::from_str(BOOTSTRAP));
        let blob =
            web_sys::Blob::new_with_str_sequence_and_options(&parts, &options).map_err(why)?;
        let script = web_sys::Url::create_object_url_with_blob(&blob).map_err(why)?;
        let worker_options = web_sys::WorkerOptions::new();
        worker_options.set_type(web_sys::WorkerType::Module);
        let worker = web_sys::Worker::new_with_options(&script, &worker_options).map_err(why)?;
        let inbox = Rc::new(RefCell::new(Vec::new()));
        let on_message = {
            let inbox = Rc::clone(&inbox);
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
                let reply = wire_from_js(&event.data())
                    .and_then(FromWorker::from_wire)
                    .unwrap_or_else(|e| FromWorker::Failed(format!("an unreadable reply: {e}")));
                inbox.borrow_mut().push(reply);
            })
        };
        let on_error = {
            let inbox = Rc::clone(&inbox);
            Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |event: web_sys::ErrorEvent| {
                event.prevent_default();
                inbox.borrow_mut().push(FromWorker::Failed(event.message()));
            })
        };
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let start = js_sys::Object::new();
        let set = |key: &str, value: &JsValue| js_sys::Reflect::set(&start, &key.into(), value);
        set("glue", &JsValue::from_str(&glue)).map_err(why)?;
        set("module", &eframe::wasm_bindgen::module()).map_err(why)?;
        worker.post_message(&start).map_err(why)?;
        Ok(Self {
            worker,
            inbox,
            script,
            _on_message: on_message,
            _on_error: on_error,
        })
    }
}

impl Channel for WebChannel {
    fn post(&self, message: &ToWorker) {
        if let Err(e) = self.worker.post_message(&wire_to_js(&message.to_wire())) {
            self.inbox.borrow_mut().push(FromWorker::Failed(format!(
                "the worker cannot be reached: {e:?}"
            )));
        }
    }

    fn take(&self) -> Vec<FromWorker> {
        std::mem::take(&mut *self.inbox.borrow_mut())
    }

    fn place(&self) -> &'static str {
        "Web Worker"
    }
}

impl Drop for WebChannel {
    fn drop(&mut self) {
        self.worker.set_onmessage(None);
        self.worker.set_onerror(None);
        self.worker.terminate();
        let _ = web_sys::Url::revoke_object_url(&self.script);
    }
}

/// The address of the glue code that loads this program: Trunk names it in
/// a `<link rel="modulepreload">`.
fn glue_address() -> Option<String> {
    let document = web_sys::window()?.document()?;
    let link = document
        .query_selector("link[rel=modulepreload][href$='.js']")
        .ok()??;
    Some(link.dyn_into::<web_sys::HtmlLinkElement>().ok()?.href())
}

fn wire_to_js(wire: &Wire) -> JsValue {
    let object = js_sys::Object::new();
    let _ = js_sys::Reflect::set(
        &object,
        &"json".into(),
        &JsValue::from_str(&wire.json.to_string()),
    );
    if let Some(params) = &wire.params {
        let _ = js_sys::Reflect::set(
            &object,
            &"params".into(),
            &js_sys::Float64Array::from(params.as_slice()),
        );
    }
    object.into()
}

fn wire_from_js(value: &JsValue) -> Result<Wire, String> {
    let text = js_sys::Reflect::get(value, &"json".into())
        .ok()
        .and_then(|j| j.as_string())
        .ok_or("a message without its fields")?;
    let json = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let params = js_sys::Reflect::get(value, &"params".into())
        .ok()
        .and_then(|p| p.dyn_into::<js_sys::Float64Array>().ok())
        .map(|p| p.to_vec());
    Ok(Wire { json, params })
}

/// Whether this program runs in a worker (it has no window to draw in).
pub fn in_worker() -> bool {
    js_sys::global()
        .dyn_into::<web_sys::DedicatedWorkerGlobalScope>()
        .is_ok()
}

/// The worker's side: answers the page's messages and trains in stretches of
/// [`CHUNK`], yielding between them (through a message channel, which does
/// not wait like a timer) so new messages are heard.
pub fn serve() {
    let Ok(scope) = js_sys::global().dyn_into::<web_sys::DedicatedWorkerGlobalScope>() else {
        return;
    };
    report_panics(scope.clone());
    let Ok(yielder) = web_sys::MessageChannel::new() else {
        return;
    };
    let core = Rc::new(RefCell::new(WorkerCore::new()));
    let scheduled = Rc::new(Cell::new(false));
    let reply = {
        let scope = scope.clone();
        move |reply: FromWorker| {
            let _ = scope.post_message(&wire_to_js(&reply.to_wire()));
        }
    };
    let schedule = {
        let port = yielder.port2();
        let scheduled = Rc::clone(&scheduled);
        move || {
            if !scheduled.replace(true) {
                let _ = port.post_message(&JsValue::NULL);
            }
        }
    };
    let on_tick = {
        let core = Rc::clone(&core);
        let reply = reply.clone();
        let schedule = schedule.clone();
        let scheduled = Rc::clone(&scheduled);
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |_: web_sys::MessageEvent| {
            scheduled.set(false);
            let trained = core.borrow_mut().work(CHUNK);
            if let Some(trained) = trained {
                reply(trained);
            }
            if core.borrow().has_work() {
                schedule();
            }
        })
    };
    yielder
        .port1()
        .set_onmessage(Some(on_tick.as_ref().unchecked_ref()));
    on_tick.forget();
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
            let answer = match wire_from_js(&event.data()).and_then(ToWorker::from_wire) {
                Ok(message) => core.borrow_mut().handle(message),
                Err(e) => Some(FromWorker::Failed(format!(
                    "a message the worker cannot read: {e}"
                ))),
            };
            if let Some(answer) = answer {
                reply(answer);
            }
            if core.borrow().has_work() {
                schedule();
            }
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
}

/// A panic in the worker reaches the page as a failure with its message.
fn report_panics(scope: web_sys::DedicatedWorkerGlobalScope) {
    std::panic::set_hook(Box::new(move |info| {
        let what = super::panic_message(info.payload());
        let place = info
            .location()
            .map(|l| format!(" ({}:{})", l.file(), l.line()))
            .unwrap_or_default();
        let failed = FromWorker::Failed(format!("the training worker broke: {what}{place}"));
        let _ = scope.post_message(&wire_to_js(&failed.to_wire()));
    }));
}
