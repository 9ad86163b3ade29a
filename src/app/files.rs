//! Files in and out of the playground: downloads in a browser (models,
//! pictures), files in the working folder natively; uploads through the
//! browser's file picker, or dropped onto the window (both).

use eframe::egui;
use std::cell::RefCell;
use std::rc::Rc;

/// A file the user gave the app: its name and bytes.
pub struct Upload {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Where files arrive (a browser reads them after the frame).
pub type UploadSlot = Rc<RefCell<Vec<Result<Upload, String>>>>;

/// Saves `bytes` as `name`: a download in a browser, a file in the working
/// folder natively. Returns what happened, for the user.
pub fn save(name: &str, mime: &str, bytes: &[u8]) -> Result<String, String> {
    #[cfg(target_arch = "wasm32")]
    {
        download(name, mime, bytes)?;
        Ok(format!("downloaded {name}"))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = mime;
        std::fs::write(name, bytes).map_err(|e| format!("could not write {name}: {e}"))?;
        let path = std::env::current_dir()
            .map(|d| d.join(name).display().to_string())
            .unwrap_or_else(|_| name.to_string());
        Ok(format!("saved {path}"))
    }
}

#[cfg(target_arch = "wasm32")]
fn download(name: &str, mime: &str, bytes: &[u8]) -> Result<(), String> {
    use eframe::wasm_bindgen::JsCast as _;
    let fail = |what: &str| format!("the browser refused the download ({what})");
    let array = js_sys::Array::new();
    array.push(&js_sys::Uint8Array::from(bytes));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(&array, &options)
        .map_err(|_| fail("blob"))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|_| fail("url"))?;
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or_else(|| fail("no document"))?;
    let link = document
        .create_element("a")
        .map_err(|_| fail("link"))?
        .dyn_into::<web_sys::HtmlAnchorElement>()
        .map_err(|_| fail("link"))?;
    link.set_href(&url);
    link.set_download(name);
    link.click();
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

/// Opens the browser's file picker for files of `accept` (e.g. "image/*");
/// the chosen file arrives in `slot`. Natively there is no picker: files are
/// dropped onto the window instead.
pub fn pick(accept: &str, slot: &UploadSlot) -> Result<(), String> {
    #[cfg(target_arch = "wasm32")]
    {
        pick_in_browser(accept, slot)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (accept, slot);
        Err("drop the file onto the window".into())
    }
}

#[cfg(target_arch = "wasm32")]
fn pick_in_browser(accept: &str, slot: &UploadSlot) -> Result<(), String> {
    use eframe::wasm_bindgen::JsCast as _;
    use eframe::wasm_bindgen::closure::Closure;
    let fail = || "the browser has no file picker here".to_string();
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or_else(fail)?;
    let input = document
        .create_element("input")
        .map_err(|_| fail())?
        .dyn_into::<web_sys::HtmlInputElement>()
        .map_err(|_| fail())?;
    input.set_type("file");
    input.set_accept(accept);
    let slot = Rc::clone(slot);
    let chosen = input.clone();
    let on_change = Closure::once_into_js(move || {
        let Some(file) = chosen.files().and_then(|f| f.get(0)) else {
            return;
        };
        wasm_bindgen_futures::spawn_local(async move {
            let name = file.name();
            let read = wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await;
            slot.borrow_mut().push(match read {
                Ok(buffer) => Ok(Upload {
                    name,
                    bytes: js_sys::Uint8Array::new(&buffer).to_vec(),
                }),
                Err(_) => Err(format!("could not read {name}")),
            });
        });
    });
    input.set_onchange(Some(on_change.unchecked_ref()));
    input.click();
    Ok(())
}

/// Reads the files dropped onto the window this frame into `slot`
/// (natively at once; a browser reads them in the background).
pub fn take_dropped(ctx: &egui::Context, slot: &UploadSlot) {
    for file in ctx.input(|i| i.raw.dropped_files.clone()) {
        let name = file
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let upload = move |read: Result<Vec<u8>, String>| {
            read.map(|bytes| Upload {
                name: name.clone(),
                bytes,
            })
            .map_err(|e| format!("could not read {name}: {e}"))
        };
        #[cfg(target_arch = "wasm32")]
        {
            let slot = Rc::clone(slot);
            wasm_bindgen_futures::spawn_local(async move {
                let read = file.bytes_async().await;
                slot.borrow_mut().push(upload(read));
            });
        }
        #[cfg(not(target_arch = "wasm32"))]
        slot.borrow_mut().push(upload(file.bytes()));
    }
}

/// Where a requested screenshot arrives (the renderer answers after the frame).
type Screenshot = std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<egui::ColorImage>>>>;

/// Saving part of the page as a PNG: the renderer is asked for a screenshot
/// after the frame that drew the part, and the part is cut from it and saved
/// when it arrives, a frame or two later.
#[derive(Default)]
pub struct ViewSaver {
    /// the file name, the part of the screen, and the screenshot on its way
    pending: Option<(String, egui::Rect, Screenshot)>,
}

impl ViewSaver {
    /// Asks for `rect` of this frame to be saved as `file`.
    pub fn request(&mut self, ctx: &egui::Context, file: String, rect: egui::Rect) {
        let slot = Screenshot::default();
        let filled = std::sync::Arc::clone(&slot);
        ctx.request_screenshot(move |image| {
            if let Ok(mut slot) = filled.lock() {
                *slot = Some(image);
            }
        });
        self.pending = Some((file, rect, slot));
    }

    /// Saves the part once its screenshot has arrived; returns what happened,
    /// for the user, when it did.
    pub fn finish(&mut self, ctx: &egui::Context) -> Option<String> {
        let (file, rect, slot) = self.pending.as_ref()?;
        let shot = slot.lock().ok().and_then(|mut s| s.take());
        let Some(shot) = shot else {
            ctx.request_repaint();
            return None;
        };
        let picture = crop(&shot, *rect, ctx.pixels_per_point());
        let saved = png(&picture).and_then(|bytes| save(file, "image/png", &bytes));
        self.pending = None;
        Some(match saved {
            Ok(done) => format!("{done}."),
            Err(e) => e,
        })
    }
}

/// Encodes an RGBA picture as PNG.
pub fn png(image: &egui::ColorImage) -> Result<Vec<u8>, String> {
    use image::ImageEncoder as _;
    let [w, h] = image.size;
    let rgba: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(&rgba, w as u32, h as u32, image::ExtendedColorType::Rgba8)
        .map_err(|e| format!("could not encode the PNG: {e}"))?;
    Ok(out)
}

/// The part of a screenshot inside `rect` (in points; `pixels_per_point` maps
/// it to the screenshot's pixels).
pub fn crop(shot: &egui::ColorImage, rect: egui::Rect, pixels_per_point: f32) -> egui::ColorImage {
    let [w, h] = shot.size;
    let px = |v: f32, max: usize| ((v * pixels_per_point).round().max(0.0) as usize).min(max);
    let (x0, x1) = (px(rect.left(), w), px(rect.right(), w));
    let (y0, y1) = (px(rect.top(), h), px(rect.bottom(), h));
    let pixels = (y0..y1)
        .flat_map(|y| shot.pixels[y * w + x0..y * w + x1].iter().copied())
        .collect();
    egui::ColorImage::new([x1 - x0, y1 - y0], pixels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use egui::{Color32, Pos2, Rect};

    #[test]
    fn a_cropped_view_encodes_as_a_png_that_decodes_to_it() {
        let shot = egui::ColorImage::new(
            [8, 6],
            (0..48)
                .map(|i| Color32::from_rgb(i as u8 * 5, 0, 255 - i as u8))
                .collect(),
        );
        // 2 pixels per point: points (1, 1)-(3, 2) are pixels (2, 2)-(6, 4)
        let part = crop(
            &shot,
            Rect::from_min_max(Pos2::new(1.0, 1.0), Pos2::new(3.0, 2.0)),
            2.0,
        );
        assert_eq!(part.size, [4, 2]);
        assert_eq!(part.pixels[0], shot.pixels[2 * 8 + 2]);
        assert_eq!(part.pixels[7], shot.pixels[3 * 8 + 5]);
        let bytes = png(&part).unwrap();
        let back = image::load_from_memory(&bytes).unwrap().to_rgba8();
        assert_eq!((back.width(), back.height()), (4, 2));
        assert_eq!(back.get_pixel(3, 1).0, part.pixels[7].to_array());
    }
}
