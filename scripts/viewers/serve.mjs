// A static file server on loopback for the viewer checks: `root` at /, and extra files at
// fixed paths (`extra`: {'/trace.json': '/abs/path'}). Resolves to the listening server.
// Chromium asks every origin for /favicon.ico on its own, at a moment of its choosing; where the
// root has none it gets 204 (no content) rather than a 404 that the page's console reports as
// an error in whichever view is being checked at that moment.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const TYPES = {
  '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html', '.css': 'text/css',
  '.wasm': 'application/wasm', '.json': 'application/json', '.woff2': 'font/woff2',
  '.png': 'image/png', '.svg': 'image/svg+xml',
};

export function serve(root, extra = {}, pages = {}) {
  const base = path.resolve(root);
  const server = http.createServer((req, res) => {
    let url = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname);
    if (url === '/') url = '/index.html';
    let body = null;
    let file = null;
    if (url in pages) {
      body = pages[url];
      file = url;
    } else {
      file = url in extra ? extra[url] : path.normalize(path.join(base, url));
      if (!(url in extra) && !file.startsWith(base)) file = null;
      if (file && fs.existsSync(file) && fs.statSync(file).isFile()) body = fs.readFileSync(file);
    }
    if (body === null && url === '/favicon.ico') {
      res.writeHead(204);
      res.end();
      return;
    }
    if (body === null) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, {'content-type': TYPES[path.extname(file)] || 'application/octet-stream'});
    res.end(body);
  });
  return new Promise(resolve => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// Headless Chromium as the probe of this machine kind starts it (no network chatter).
export const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
