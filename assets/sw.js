// Flow Playground's service worker: after one visit the page also works
// offline, and every build has a cache of its own (the version and file list
// below are stamped into the built copy by scripts/stamp-service-worker.sh), so
// a redeploy is never served stale: the new worker drops the old caches.
const VERSION = "__BUILD_VERSION__";
const FILES = __BUILD_FILES__;
const CACHE = `flowplay-${VERSION}`;

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches.open(CACHE).then((cache) => cache.addAll(FILES)).then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then((keys) => Promise.all(
        keys.filter((k) => k.startsWith("flowplay-") && k !== CACHE).map((k) => caches.delete(k)),
      ))
      .then(() => self.clients.claim()),
  );
});

// Network first, so a deploy is seen at once; the cache answers offline.
self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET" || new URL(request.url).origin !== self.location.origin) return;
  event.respondWith(
    fetch(request)
      .then((response) => {
        if (response.ok) {
          const copy = response.clone();
          caches.open(CACHE).then((cache) => cache.put(request, copy));
        }
        return response;
      })
      .catch(() => caches.match(request, { ignoreSearch: true })
        .then((hit) => hit || caches.match("./"))),
  );
});
