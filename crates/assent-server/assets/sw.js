// The review page's service worker: it keeps the page's shell (the HTML, the script,
// the style, the manifest and the icons) so that the installed app opens, and nothing
// else. Every other request (the API, the event stream) goes to the network and only
// there: offline, an API call fails, it is never answered from a stored copy, so a
// person never decides on what the server no longer says.
"use strict";
const SHELL = "assent-shell-v1";
const FILES = ["/", "/assets/app.js", "/assets/app.css", "/manifest.webmanifest", "/assets/icon-192.png", "/assets/icon-512.png"];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(SHELL).then((cache) => cache.addAll(FILES)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((key) => key !== SHELL).map((key) => caches.delete(key))))
    .then(() => self.clients.claim()));
});

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  // Not the shell: not answered here at all (the browser asks the network itself).
  if (event.request.method !== "GET" || url.origin !== self.location.origin || !FILES.includes(url.pathname)) return;
  // The shell: the network first (a new version shows at once), the stored copy offline.
  event.respondWith(fetch(event.request)
    .then((response) => {
      if (response.ok) {
        const copy = response.clone();
        caches.open(SHELL).then((cache) => cache.put(url.pathname, copy));
      }
      return response;
    })
    .catch(() => caches.match(url.pathname).then((stored) => stored || Response.error())));
});
