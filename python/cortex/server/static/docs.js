// The "Send" forms of /docs: each posts its body (or GETs its path) with the token given.
"use strict";
for (const form of document.querySelectorAll("form.try")) {
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const out = form.querySelector(".out");
    const headers = { Accept: "application/json" };
    const token = document.getElementById("token").value;
    if (token) headers.Authorization = "Bearer " + token;
    const method = form.dataset.method;
    let path = form.dataset.path;
    const init = { method, headers };
    if (method === "POST") {
      headers["Content-Type"] = "application/json";
      init.body = form.elements.body.value;
    } else {
      path = form.elements.path.value;
    }
    try {
      const res = await fetch(path, init);
      const text = await res.text();
      let shown = text;
      try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON */ }
      out.textContent = res.status + " " + res.statusText + "\n" + shown;
    } catch (e) {
      out.textContent = "the server cannot be reached: " + e.message;
    }
  });
}
