// Sign in with an API key without leaving the page on a wrong key.

const form = document.getElementById("login-form");
const note = form.querySelector(".form-error");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  note.hidden = true;
  const data = new FormData(form);
  let response;
  try {
    response = await fetch(form.action, { method: "POST", body: new URLSearchParams(data), redirect: "manual",
      credentials: "same-origin" });
  } catch {
    note.textContent = "The server cannot be reached.";
    note.hidden = false;
    return;
  }
  if (response.type === "opaqueredirect" || response.ok) {
    // the server's rule: a path on this server, never "//host", "/\host", a backslash or a control character
    const next = String(data.get("next") || "/");
    location.assign(/^\/(?![/\\])[^\\\u0000-\u001f\u007f]*$/.test(next) ? next : "/");
    return;
  }
  let message = "That API key was not accepted.";
  try { message = (await response.json()).error.message || message; } catch { /* keep the default */ }
  note.textContent = message;
  note.hidden = false;
});
