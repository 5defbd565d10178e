/* cardproof: let the site's search run when the pages are opened from disk.
 *
 * A page read over file:// may not start a Web Worker, and Material's search
 * runs in one.  Material's own answer (its offline plugin) loads a shim from
 * a CDN, which a published result must never call.  This file is that shim,
 * shipped with the site: on file:// only, Worker becomes an object that runs
 * the worker script in a hidden same-origin iframe and passes the messages
 * across.  Material's search worker looks for "IFrameWorker" in its parent
 * and then awaits importScripts, so loading those by script tag suffices.
 *
 * It also answers fetch() and XMLHttpRequest of file:// URLs with a rejection of its own: the
 * language selector asks for sitemap.xml, which Chromium cannot fetch from
 * disk and would report as a console error; the selector then simply follows
 * its link, which already names the same page in the other language.
 */
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  function IFrameWorker(url) {
    var target = document.createElement("div");
    var listeners = target;  // an EventTarget of the page's own realm
    var frame = document.createElement("iframe");
    var queue = [];
    var ready = false;
    var self = this;
    this.onmessage = null;
    frame.setAttribute("aria-hidden", "true");
    frame.style.display = "none";
    document.body.appendChild(frame);
    var win = frame.contentWindow;
    var doc = win.document;

    function load(src) {
      return new Promise(function (resolve, reject) {
        var s = doc.createElement("script");
        s.src = src;
        s.onload = function () { resolve(); };
        s.onerror = function () { reject(new Error("cannot load " + src)); };
        doc.head.appendChild(s);
      });
    }
    win.importScripts = function () {
      var srcs = Array.prototype.slice.call(arguments);
      return srcs.reduce(function (p, src) {
        return p.then(function () { return load(src); });
      }, Promise.resolve());
    };
    win.postMessage = function (data) {
      var ev = new MessageEvent("message", { data: data });
      if (typeof self.onmessage === "function") self.onmessage(ev);
      listeners.dispatchEvent(ev);
    };
    this.addEventListener = function (type, fn, opts) { listeners.addEventListener(type, fn, opts); };
    this.removeEventListener = function (type, fn, opts) { listeners.removeEventListener(type, fn, opts); };
    this.dispatchEvent = function (ev) { return listeners.dispatchEvent(ev); };
    this.postMessage = function (data) {
      if (!ready) { queue.push(data); return; }
      win.dispatchEvent(new win.MessageEvent("message", { data: data }));
    };
    this.terminate = function () { frame.remove(); };
    load(new URL(url, location.href).href).then(function () {
      ready = true;
      queue.splice(0).forEach(self.postMessage);
    });
  }

  window.IFrameWorker = IFrameWorker;
  window.Worker = IFrameWorker;

  // Reject what a browser cannot read from disk before it is tried, so
  // nothing is logged as an error (see the top of this file).
  function onDisk(url) {
    try { return new URL(String(url), location.href).protocol === "file:"; } catch (e) { return false; }
  }
  var nativeFetch = window.fetch;
  window.fetch = function (input, init) {
    var url = input && typeof input === "object" && "url" in input ? input.url : input;
    if (onDisk(url)) return Promise.reject(new TypeError("not fetched from disk: " + url));
    return nativeFetch.call(window, input, init);
  };
  var nativeOpen = XMLHttpRequest.prototype.open;
  var nativeSend = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url) {
    this.__cardproofOnDisk = onDisk(url);
    return nativeOpen.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function () {
    if (!this.__cardproofOnDisk) return nativeSend.apply(this, arguments);
    var xhr = this;
    setTimeout(function () { xhr.dispatchEvent(new ProgressEvent("error")); }, 0);
  };
})();
