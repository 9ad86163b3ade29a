//! The page's glue to the browser: its address (settings live in the URL
//! query), its tab title, and running asynchronous work. Natively each of
//! these is a harmless stand-in, so the app's code needs no `cfg` of its own.

/// Runs `task` to completion: in a browser on its event loop, natively now.
pub fn spawn(task: impl std::future::Future<Output = ()> + 'static) {
    #[cfg(target_arch = "wasm32")]
    wasm_bindgen_futures::spawn_local(task);
    #[cfg(not(target_arch = "wasm32"))]
    pollster::block_on(task);
}

/// Sets the browser tab's title (web only).
pub fn set_page_title(title: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(document) = web_sys::window().and_then(|w| w.document()) {
            document.set_title(title);
        }
    }
    let _ = title;
}

/// The page's URL query (web), or nothing (native).
pub fn page_query() -> String {
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(search) = web_sys::window().and_then(|w| w.location().search().ok()) {
            return search;
        }
    }
    String::new()
}

/// A link that opens `query` (the page's address on the web).
pub fn page_link(query: &str) -> String {
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(location) = web_sys::window().map(|w| w.location())
            && let (Ok(origin), Ok(path)) = (location.origin(), location.pathname())
        {
            return format!("{origin}{path}?{query}");
        }
    }
    format!("?{query}")
}

/// Puts `query` in the address bar without reloading (web only).
pub fn set_page_query(query: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
            let _ = history.replace_state_with_url(
                &eframe::wasm_bindgen::JsValue::NULL,
                "",
                Some(&format!("?{query}")),
            );
        }
    }
    let _ = query;
}
