//! A wgpu device for compute work, and the small helpers kernels share.

use crate::gpu::GpuError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[cfg(not(target_arch = "wasm32"))]
const NO_ADAPTER_HINT: &str = "install a Vulkan driver (on a machine without a GPU: Mesa's lavapipe, Debian package mesa-vulkan-drivers)";
#[cfg(target_arch = "wasm32")]
const NO_ADAPTER_HINT: &str = "this browser offers no WebGPU (it needs a recent Chrome, Edge or Firefox, and a secure https or localhost page)";

/// A name for the adapter. Browsers hide the device's name (WebGPU's adapter
/// description is usually empty), so there it is the API, and whether the
/// browser fell back to a software adapter.
fn adapter_label(info: &wgpu::AdapterInfo) -> String {
    if !info.name.is_empty() {
        return info.name.clone();
    }
    let api = match info.backend {
        wgpu::Backend::BrowserWebGpu => "WebGPU".to_string(),
        other => format!("{other:?}"),
    };
    if info.device_type == wgpu::DeviceType::Cpu {
        format!("{api}, software adapter")
    } else {
        api
    }
}

/// `base` with the storage sizes the kernels want raised to what the adapter
/// offers. The defaults cap a storage buffer at 128 MB; a real GPU allows far
/// more, and large batches need it (measured on an H200: batch 65536 of a
/// radial flow needs 449 MB of per-sample gradients).
pub fn compute_limits(offered: &wgpu::Limits, base: wgpu::Limits) -> wgpu::Limits {
    wgpu::Limits {
        max_storage_buffer_binding_size: offered.max_storage_buffer_binding_size,
        max_buffer_size: offered.max_buffer_size,
        ..base
    }
}

/// An adapter, its device and queue. Clones share the device (and its error slot).
#[derive(Clone)]
pub struct GpuContext {
    pub adapter_name: String,
    pub backend: String,
    /// Whether the adapter is a software rasterizer on the CPU (lavapipe,
    /// SwiftShader, a browser's fallback adapter): it runs the kernels, but
    /// often slower than the CPU trainers.
    pub software: bool,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// The first error the device reported (validation, out of memory, lost
    /// device), instead of wgpu's default of panicking.
    error: Arc<Mutex<Option<String>>>,
    /// Why the device was lost, once it is (a driver reset, a browser
    /// reclaiming the GPU, `destroy`).
    lost: Arc<Mutex<Option<String>>>,
    /// Bytes copied back to the CPU so far (the views' traffic is measured by it).
    read_back: Arc<AtomicU64>,
}

impl GpuContext {
    /// Finds an adapter and opens a device (blocking; native only). Fails with a
    /// readable reason when there is none, e.g. no Vulkan driver installed.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_blocking() -> Result<Self, GpuError> {
        pollster::block_on(Self::new())
    }

    pub async fn new() -> Result<Self, GpuError> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::NoAdapter {
                hint: NO_ADAPTER_HINT,
                reason: e.to_string(),
            })?;
        let info = adapter.get_info();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("flowplay"),
                required_limits: compute_limits(
                    &adapter.limits(),
                    wgpu::Limits::downlevel_defaults().using_resolution(adapter.limits()),
                ),
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::DeviceRefused {
                adapter: info.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(Self::from_device(&info, device, queue))
    }

    /// The context of a device opened elsewhere (the one the app renders
    /// with), which must allow the kernels' limits ([`compute_limits`]). Its
    /// errors and its loss are reported here from now on, instead of wgpu's
    /// default of panicking.
    pub fn from_device(info: &wgpu::AdapterInfo, device: wgpu::Device, queue: wgpu::Queue) -> Self {
        let error: Arc<Mutex<Option<String>>> = Arc::default();
        let slot = Arc::clone(&error);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut first) = slot.lock() {
                first.get_or_insert_with(|| e.to_string());
            }
        }));
        let lost: Arc<Mutex<Option<String>>> = Arc::default();
        let slot = Arc::clone(&lost);
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut lost) = slot.lock() {
                let why = if message.is_empty() {
                    format!("{reason:?}")
                } else {
                    message
                };
                lost.get_or_insert(why);
            }
        });
        Self {
            adapter_name: adapter_label(info),
            backend: format!("{:?}", info.backend),
            software: info.device_type == wgpu::DeviceType::Cpu,
            device,
            queue,
            error,
            lost,
            read_back: Arc::default(),
        }
    }

    /// Whether `other` is this context or a clone of it (the same device).
    pub fn same_device(&self, other: &GpuContext) -> bool {
        Arc::ptr_eq(&self.error, &other.error)
    }

    /// How many bytes have been copied back from the device to the CPU.
    pub fn bytes_read_back(&self) -> u64 {
        self.read_back.load(Ordering::Relaxed)
    }

    /// Why the device was lost, if it was: nothing more can run on it.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().ok().and_then(|l| l.clone())
    }

    /// The first error the device has reported, if any (it stays reported).
    pub fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }

    /// A compute pipeline from composed WGSL source ([`super::shader::compose`])
    /// with the given entry point.
    pub fn pipeline_at(&self, label: &str, source: &str, entry: &str) -> wgpu::ComputePipeline {
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
        self.device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
    }

    /// A storage buffer holding `data`.
    pub fn storage(&self, label: &str, data: &[u8], writable: bool) -> wgpu::Buffer {
        let mut usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        if writable {
            usage |= wgpu::BufferUsages::COPY_SRC;
        }
        self.buffer_with(label, data, usage)
    }

    /// A buffer of `usage` holding `data`, written through the queue: unlike
    /// wgpu's `create_buffer_init` (a buffer mapped at creation), this does
    /// not panic once the device is lost; the error reaches the error slot.
    fn buffer_with(&self, label: &str, data: &[u8], usage: wgpu::BufferUsages) -> wgpu::Buffer {
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: (data.len() as u64).next_multiple_of(4).max(4),
            usage: usage | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if data.len().is_multiple_of(4) {
            self.queue.write_buffer(&buffer, 0, data);
        } else {
            let mut padded = data.to_vec();
            padded.resize(data.len().next_multiple_of(4), 0);
            self.queue.write_buffer(&buffer, 0, &padded);
        }
        buffer
    }

    /// A bind group of `pipeline`'s group 0 with `buffers` at bindings 0, 1, ...
    pub fn bind(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let numbered: Vec<(u32, &wgpu::Buffer)> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| (i as u32, *b))
            .collect();
        self.bind_at(pipeline, &numbered)
    }

    /// A bind group of `pipeline`'s group 0 with each buffer at its binding.
    pub fn bind_at(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[(u32, &wgpu::Buffer)],
    ) -> wgpu::BindGroup {
        let layout = pipeline.get_bind_group_layout(0);
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: *i,
                resource: b.as_entire_binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &entries,
        })
    }

    /// A bind group of `pipeline`'s group 0: binding 0 is `size` bytes of
    /// `uniforms` from `offset` (one operation's settings in a shared buffer),
    /// the others whole buffers.
    pub fn bind_with_uniform_range(
        &self,
        pipeline: &wgpu::ComputePipeline,
        uniforms: (&wgpu::Buffer, u64, u64),
        buffers: &[(u32, &wgpu::Buffer)],
    ) -> wgpu::BindGroup {
        let layout = pipeline.get_bind_group_layout(0);
        let (buffer, offset, size) = uniforms;
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer,
                offset,
                size: wgpu::BufferSize::new(size),
            }),
        }];
        entries.extend(buffers.iter().map(|(i, b)| wgpu::BindGroupEntry {
            binding: *i,
            resource: b.as_entire_binding(),
        }));
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &entries,
        })
    }

    /// Runs `pipeline` with `bind` over `workgroups` workgroups (one submission).
    pub fn dispatch(
        &self,
        pipeline: &wgpu::ComputePipeline,
        bind: &wgpu::BindGroup,
        workgroups: u32,
    ) {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bind, &[]);
            pass.dispatch_workgroups(workgroups, 1, 1);
        }
        self.queue.submit([encoder.finish()]);
    }

    /// A uniform buffer holding `data`.
    pub fn uniform(&self, label: &str, data: &[u8]) -> wgpu::Buffer {
        self.buffer_with(label, data, wgpu::BufferUsages::UNIFORM)
    }

    /// Copies `buffer` back to the CPU, waiting for the GPU (native only: a
    /// browser must never block a frame on this; it awaits [`Self::read_back_async`]).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_back(&self, buffer: &wgpu::Buffer) -> Result<Vec<u8>, GpuError> {
        self.read_back_range(buffer, 0, buffer.size())
    }

    /// Copies `size` bytes of `buffer` from byte `offset` back to the CPU,
    /// waiting for the GPU (native only). Both must be multiples of 4.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_back_range(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>, GpuError> {
        pollster::block_on(self.read_back_async(buffer, offset, size))
    }

    /// Copies `size` bytes of `buffer` from byte `offset` back to the CPU once
    /// the GPU has finished the work submitted before. In a browser the future
    /// resolves when WebGPU maps the buffer; natively this waits for the device.
    pub async fn read_back_async(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>, GpuError> {
        if let Some(why) = self.lost() {
            return Err(GpuError::Device(format!("the GPU device was lost ({why})")));
        }
        self.read_back.fetch_add(size, Ordering::Relaxed);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read back"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
        self.queue.submit([encoder.finish()]);
        let slice = staging.slice(..);
        let mapped = Mapped::default();
        let slot = mapped.clone();
        slice.map_async(wgpu::MapMode::Read, move |r| slot.finish(r));
        // Natively nothing maps until the device is polled; in a browser this
        // returns at once and the browser maps the buffer.
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: None,
            })
            .map_err(|e| GpuError::Device(format!("waiting for the GPU failed: {e}")))?;
        mapped
            .await
            .map_err(|e| GpuError::Device(format!("mapping the GPU buffer failed: {e}")))?;
        if let Some(e) = self.error() {
            return Err(GpuError::Device(format!("the GPU reported an error: {e}")));
        }
        let bytes = slice
            .get_mapped_range()
            .map_err(|e| GpuError::Device(format!("reading the GPU buffer failed: {e:?}")))?
            .to_vec();
        staging.unmap();
        Ok(bytes)
    }
}

/// A one-shot future for `map_async`'s callback (wgpu hands the result to a
/// callback; the browser runs it later, so a blocking channel cannot be used).
#[derive(Clone, Default)]
struct Mapped(Arc<Mutex<MapState>>);

#[derive(Default)]
struct MapState {
    result: Option<Result<(), wgpu::BufferAsyncError>>,
    waker: Option<std::task::Waker>,
}

impl Mapped {
    fn finish(&self, result: Result<(), wgpu::BufferAsyncError>) {
        if let Ok(mut state) = self.0.lock() {
            state.result = Some(result);
            if let Some(waker) = state.waker.take() {
                waker.wake();
            }
        }
    }
}

impl std::future::Future for Mapped {
    type Output = Result<(), wgpu::BufferAsyncError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Ok(mut state) = self.0.lock() else {
            return std::task::Poll::Ready(Err(wgpu::BufferAsyncError));
        };
        match state.result.take() {
            Some(result) => std::task::Poll::Ready(result),
            None => {
                state.waker = Some(cx.waker().clone());
                std::task::Poll::Pending
            }
        }
    }
}
