// The console's DOM helpers: the page's data, elements, toasts.

export const D = document.body.dataset;
export const app = document.getElementById("app");
export const enc = encodeURIComponent;


export function el(tag, props, ...kids) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value == null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "html") node.innerHTML = value; // only ever our own escaped markup
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const kid of kids.flat()) {
    if (kid != null && kid !== false) node.append(kid instanceof Node ? kid : String(kid));
  }
  return node;
}

// Replace a node's children, leaving out the null and false of optional parts.
export function fill(node, ...kids) {
  node.replaceChildren(...kids.flat().filter((k) => k != null && k !== false));
}

export function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

export function toast(text, kind = "info") {
  const box = document.getElementById("toasts");
  const close = el("button", { type: "button", "aria-label": "Dismiss", text: "✕" });
  const node = el("div", { class: `toast ${kind}` }, el("span", { text }), close);
  close.addEventListener("click", () => node.remove());
  box.append(node);
  setTimeout(() => node.remove(), kind === "error" ? 12000 : 5000);
}

export function toastError(err) {
  if (err && err.status === 401) return; // the token prompt says it
  toast(err && err.message ? err.message : String(err), "error");
}
