//! A worker in the browser: a module Web Worker that instantiates this same
//! program (the page hands it the compiled module and the address of the
//! glue code Trunk wrote), whose start sees no window and serves
//! [`WorkerCore`] instead of drawing. Messages are plain objects: the fields
//! as JSON text, the numbers as a `Float64Array` beside them. A worker whose
//! run splits its steps starts its helpers itself, as nested Web Workers
//! from the same module.

use super::core::{Helper, WorkerCore};
use super::protocol::{FromWorker, ToWorker, Wire};
use super::{CHUNK, Channel};
use eframe::wasm_bindgen::closure::Closure;
use eframe::wasm_bindgen::{JsCast, JsValue};
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

/// The worker's first script: it loads the program from the address and
/// module the page sends first (keeping both, for helpers of its own), keeps
/// what arrives meanwhile, and hands that to the program's own handler once
/// it has installed it.
const BOOTSTRAP: &str = r#"
const early = [];
self.onmessage = async (event) => {
  self.onmessage = (e) => early.push(e.data);
  self.flowplayProgram = event.data;
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

/// A Web Worker running this program, its replies handed to a function.
struct WebWorker {
    worker: web_sys::Worker,
    script: String,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::ErrorEvent)>,
}

impl WebWorker {
    /// Starts the program from the glue at `glue` and `module` in a new
    /// worker; its replies (and its failures) go to `sink`.
    fn spawn(glue: &str, module: &JsValue, sink: Rc<dyn Fn(FromWorker)>) -> Result<Self, String> {
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
        let on_message = {
            let sink = Rc::clone(&sink);
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
                let reply = wire_from_js(&event.data())
                    .and_then(FromWorker::from_wire)
                    .unwrap_or_else(|e| FromWorker::Failed(format!("an unreadable reply: {e}")));
                sink(reply);
            })
        };
        let on_error =
            Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |event: web_sys::ErrorEvent| {
                event.prevent_default();
                sink(FromWorker::Failed(event.message()));
            });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let start = js_sys::Object::new();
        let set = |key: &str, value: &JsValue| js_sys::Reflect::set(&start, &key.into(), value);
        set("glue", &JsValue::from_str(glue)).map_err(why)?;
        set("module", module).map_err(why)?;
        worker.post_message(&start).map_err(why)?;
        Ok(Self {
            worker,
            script,
            _on_message: on_message,
            _on_error: on_error,
        })
    }

    fn post(&self, message: &ToWorker) -> Result<(), String> {
        self.worker
            .post_message(&wire_to_js(&message.to_wire()))
            .map_err(|e| format!("the worker cannot be reached: {e:?}"))
    }
}

impl Drop for WebWorker {
    fn drop(&mut self) {
        self.worker.set_onmessage(None);
        self.worker.set_onerror(None);
        self.worker.terminate();
        let _ = web_sys::Url::revoke_object_url(&self.script);
    }
}

impl Helper for WebWorker {
    fn post(&self, message: &ToWorker) -> Result<(), String> {
        WebWorker::post(self, message)
    }
}

/// The page's end of a Web Worker.
pub struct WebChannel {
    worker: WebWorker,
    inbox: Rc<RefCell<Vec<FromWorker>>>,
}

impl WebChannel {
    /// A worker running this program, or why there is none (the page then
    /// trains on its own thread).
    pub fn spawn() -> Result<Self, String> {
        let glue = glue_address().ok_or("the page does not name its program's script")?;
        let inbox = Rc::new(RefCell::new(Vec::new()));
        let sink = {
            let inbox = Rc::clone(&inbox);
            Rc::new(move |reply: FromWorker| inbox.borrow_mut().push(reply))
        };
        let worker = WebWorker::spawn(&glue, &eframe::wasm_bindgen::module(), sink)?;
        Ok(Self { worker, inbox })
    }
}

impl Channel for WebChannel {
    fn post(&self, message: &ToWorker) {
        if let Err(why) = self.worker.post(message) {
            self.inbox.borrow_mut().push(FromWorker::Failed(why));
        }
    }

    fn take(&self) -> Vec<FromWorker> {
        std::mem::take(&mut *self.inbox.borrow_mut())
    }

    fn place(&self) -> &'static str {
        "Web Worker"
    }
}

/// The cores the browser offers (`navigator.hardwareConcurrency`; 1 where
/// it does not say), on the page and in a worker alike.
pub fn hardware_concurrency() -> usize {
    js_sys::Reflect::get(&js_sys::global(), &"navigator".into())
        .and_then(|n| js_sys::Reflect::get(&n, &"hardwareConcurrency".into()))
        .ok()
        .and_then(|c| c.as_f64())
        .map_or(1, |c| c.max(1.0) as usize)
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
    if let Some(floats) = &wire.floats {
        let _ = js_sys::Reflect::set(
            &object,
            &"floats".into(),
            &js_sys::Float32Array::from(floats.as_slice()),
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
    let floats = js_sys::Reflect::get(value, &"floats".into())
        .ok()
        .and_then(|p| p.dyn_into::<js_sys::Float32Array>().ok())
        .map(|p| p.to_vec());
    Ok(Wire {
        json,
        params,
        floats,
    })
}

/// Whether this program runs in a worker (it has no window to draw in).
pub fn in_worker() -> bool {
    js_sys::global()
        .dyn_into::<web_sys::DedicatedWorkerGlobalScope>()
        .is_ok()
}

/// The worker's side: answers the page's messages (and its helpers') and
/// trains in stretches of [`CHUNK`], yielding between them (through a
/// message channel, which does not wait like a timer) so new messages are
/// heard.
pub fn serve() {
    let Ok(scope) = js_sys::global().dyn_into::<web_sys::DedicatedWorkerGlobalScope>() else {
        return;
    };
    report_panics(scope.clone());
    let Ok(yielder) = web_sys::MessageChannel::new() else {
        return;
    };
    let lead = Rc::new(Lead {
        core: RefCell::new(WorkerCore::new()),
        scope: scope.clone(),
        tick_port: yielder.port2(),
        scheduled: Cell::new(false),
    });
    let on_tick = {
        let lead = Rc::clone(&lead);
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |_: web_sys::MessageEvent| {
            lead.scheduled.set(false);
            lead.core.borrow_mut().work(CHUNK);
            lead.flush();
        })
    };
    yielder
        .port1()
        .set_onmessage(Some(on_tick.as_ref().unchecked_ref()));
    on_tick.forget();
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
            match wire_from_js(&event.data()).and_then(ToWorker::from_wire) {
                Ok(message) => lead.hear(message),
                Err(e) => lead.reply(FromWorker::Failed(format!(
                    "a message the worker cannot read: {e}"
                ))),
            }
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
}

/// A worker's state between events: its core, where its replies go and the
/// port that wakes it for the next stretch.
struct Lead {
    core: RefCell<WorkerCore>,
    scope: web_sys::DedicatedWorkerGlobalScope,
    tick_port: web_sys::MessagePort,
    scheduled: Cell<bool>,
}

impl Lead {
    /// A message from the page or from a helper.
    fn hear(self: &Rc<Self>, message: ToWorker) {
        if let ToWorker::Start(spec) = &message
            && spec.helpers > 0
        {
            // a browser without nested workers: this worker trains alone,
            // and its answer to the start says so
            let helpers = self.spawn_helpers(spec.helpers).unwrap_or_else(|why| {
                web_sys::console::warn_1(&format!("no helper workers: {why}").into());
                Vec::new()
            });
            self.core.borrow_mut().set_helpers(helpers);
        }
        self.core.borrow_mut().handle(message);
        self.flush();
    }

    /// Sends the core's replies and wakes it again while it has steps to take.
    fn flush(&self) {
        let replies = self.core.borrow_mut().take_replies();
        for reply in replies {
            self.reply(reply);
        }
        if self.core.borrow().has_work() && !self.scheduled.replace(true) {
            let _ = self.tick_port.post_message(&JsValue::NULL);
        }
    }

    fn reply(&self, reply: FromWorker) {
        let _ = self.scope.post_message(&wire_to_js(&reply.to_wire()));
    }

    /// Helpers started from the program this worker was started from, their
    /// answers heard as this worker's messages.
    fn spawn_helpers(self: &Rc<Self>, count: usize) -> Result<Vec<Box<dyn Helper>>, String> {
        let program = js_sys::Reflect::get(&js_sys::global(), &"flowplayProgram".into())
            .map_err(|e| format!("{e:?}"))?;
        let glue = js_sys::Reflect::get(&program, &"glue".into())
            .ok()
            .and_then(|g| g.as_string())
            .ok_or("the worker does not know its program's script")?;
        let module =
            js_sys::Reflect::get(&program, &"module".into()).map_err(|e| format!("{e:?}"))?;
        (0..count)
            .map(|_| {
                let lead: Weak<Lead> = Rc::downgrade(self);
                let sink = Rc::new(move |reply: FromWorker| {
                    if let (Some(lead), Some(message)) = (lead.upgrade(), reply.for_lead()) {
                        lead.hear(message);
                    }
                });
                WebWorker::spawn(&glue, &module, sink).map(|w| Box::new(w) as Box<dyn Helper>)
            })
            .collect()
    }
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
