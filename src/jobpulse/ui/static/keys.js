// API keys for admins: the keys of the admin's projects, a form that creates a key or an access key pair
// (its secret shown once, here), and revocation after a confirmation.

import { api } from "./api.js";
import { clear, h } from "./dom.js";
import { dateTime, fullTime } from "./format.js";
import { app, boot, done } from "./shell.js";

const ROLES = [
  ["read", "read: see jobs and their data"],
  ["write", "write: also send data"],
  ["admin", "admin: also manage keys"],
];
const allProjects = (boot.projects || []).includes("*");

const table = h("table", { class: "grid keys-table" });
const secretBox = h("div", { class: "key-secret", hidden: true });
const formError = h("p", { class: "form-error", role: "alert", hidden: true });
const nameInput = h("input", { type: "text", id: "key-name", name: "name", maxlength: "200", required: true,
  placeholder: "e.g. training nodes of team A", autocomplete: "off" });
const projectsInput = h("input", { type: "text", id: "key-projects", name: "projects", required: true,
  autocomplete: "off", placeholder: allProjects ? "vision, nlp  or  * for all projects" : boot.projects.join(", "),
  value: allProjects ? "" : boot.projects.join(", ") });
const roleSelect = h("select", { id: "key-role", name: "role" }, ROLES.map(([v, text]) => h("option", { value: v }, text)));
const kindSelect = h("select", { id: "key-kind", name: "kind" },
  h("option", { value: "token" }, "Token (jobpulse SDK, CLI, HTTP)"),
  h("option", { value: "pair" }, "Access key pair (vendors' SDKs that sign requests)"));
const createBtn = h("button", { class: "btn btn-primary", type: "submit" }, "Create key");

function projectsOf(text) {
  return text.split(/[\s,]+/).map((p) => p.trim()).filter(Boolean);
}

function field(id, text, control, hint = null) {
  return h("div", { class: "form-field" }, h("label", { for: id }, text), control,
    hint ? h("span", { class: "faint" }, hint) : null);
}

function copyButton(text, what) {
  const button = h("button", { class: "btn btn-sm", type: "button", "aria-label": `Copy ${what}` }, "Copy");
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Select and copy by hand";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 2000);
  });
  return button;
}

function secretRow(label, value, cls) {
  return h("div", { class: "secret-row" }, h("span", { class: "secret-label" }, label),
    h("code", { class: `secret-value ${cls}` }, value), copyButton(value, label.toLowerCase()));
}

// The secret of a key just created: shown once, never again (the server keeps only its hash or a sealed copy).
function showSecret(answer) {
  const rows = answer.token
    ? [secretRow("Token", answer.token, "secret-token")]
    : [secretRow("Access key id", answer.access_key_id, "secret-id"),
      secretRow("Access key secret", answer.access_key_secret, "secret-pair")];
  const close = h("button", { class: "btn btn-sm", type: "button" }, "I have stored it");
  close.addEventListener("click", () => { secretBox.hidden = true; clear(secretBox); });
  clear(secretBox).append(h("div", { class: "alert alert-warn", role: "status" }, h("div", {},
    h("strong", {}, `Key “${answer.key.name || answer.key.key_id}” created. `),
    "Copy its secret now: it is shown only this once and cannot be shown again. Store it in a secret manager " +
      "or the credentials file; if it is lost, revoke the key and create a new one.",
    h("div", { class: "secret-rows" }, rows), close)));
  secretBox.hidden = false;
  secretBox.scrollIntoView({ block: "nearest" });
}

async function create(event) {
  event.preventDefault();
  formError.hidden = true;
  const projects = projectsOf(projectsInput.value);
  if (!projects.length) {
    formError.textContent = "Name at least one project, or * for all projects.";
    formError.hidden = false;
    projectsInput.focus();
    return;
  }
  createBtn.disabled = true;
  try {
    const answer = await api("/jp/v1/keys", { method: "POST", body: { name: nameInput.value.trim(), projects,
      role: roleSelect.value, pair: kindSelect.value === "pair" } });
    showSecret(answer);
    nameInput.value = "";
    await load();
  } catch (error) {
    formError.textContent = error.field ? `${error.message} (${error.field})` : error.message;
    formError.hidden = false;
  } finally {
    createBtn.disabled = false;
  }
}

// Revoking asks first, in the row: the key's name and what revoking does.
function askRevoke(cell, key) {
  const yes = h("button", { class: "btn btn-sm btn-danger", type: "button" }, "Revoke");
  const no = h("button", { class: "btn btn-sm", type: "button" }, "Cancel");
  const own = key.key_id === boot.self;
  no.addEventListener("click", () => load());
  yes.addEventListener("click", async () => {
    yes.disabled = true;
    try {
      await api(`/jp/v1/keys/${encodeURIComponent(key.key_id)}`, { method: "DELETE" });
      await load();
    } catch (error) {
      clear(cell).append(h("span", { class: "error-message" }, error.message));
    }
  });
  clear(cell).append(h("div", { class: "confirm", role: "group", "aria-label": "Confirm revoking" },
    h("span", {}, own ? "This is the key of this session: revoking it signs you out. Revoke? "
      : "Clients using it stop working at once. Revoke? "), yes, no));
}

function row(key) {
  const actions = h("td", { class: "actions" });
  if (!key.revoked) {
    const revoke = h("button", { class: "btn btn-sm", type: "button", "aria-label": `Revoke ${key.name || key.key_id}` },
      "Revoke");
    revoke.addEventListener("click", () => askRevoke(actions, key));
    actions.append(revoke);
  }
  return h("tr", { dataset: { key: key.key_id }, class: key.revoked ? "revoked" : null },
    h("td", {}, h("div", {}, key.name || h("span", { class: "faint" }, "(no name)")),
      h("div", { class: "mono faint" }, key.key_id)),
    h("td", {}, key.kind === "pair" ? "access key pair" : "token"),
    h("td", {}, key.projects.includes("*") ? "all projects" : key.projects.join(", ")),
    h("td", {}, key.role),
    h("td", { title: fullTime(key.created) }, dateTime(key.created)),
    h("td", { title: key.revoked ? fullTime(key.revoked) : "" },
      key.revoked ? h("span", { class: "badge badge-failed" }, `revoked ${dateTime(key.revoked)}`)
        : h("span", { class: "badge badge-completed" }, "active")),
    actions);
}

async function load() {
  try {
    const { keys } = await api("/jp/v1/keys");
    keys.sort((a, b) => (a.revoked ? 1 : 0) - (b.revoked ? 1 : 0) || b.created - a.created);
    clear(table).append(
      h("thead", {}, h("tr", {}, ["Name", "Kind", "Projects", "Role", "Created", "State", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, keys.length ? keys.map(row)
        : h("tr", {}, h("td", { colspan: "7", class: "muted" }, "No keys in your projects yet."))));
  } catch (error) {
    clear(table).append(h("tbody", {}, h("tr", {}, h("td", {}, h("div", { class: "notice error-message" },
      error.message)))));
  }
}

const form = h("form", { class: "key-form", "aria-label": "Create a key" },
  field("key-name", "Name", nameInput, "who or what uses it"),
  field("key-projects", "Projects", projectsInput, allProjects ? "comma-separated; * for all" : "within your projects"),
  field("key-role", "Role", roleSelect),
  field("key-kind", "Kind", kindSelect),
  h("div", { class: "form-actions" }, createBtn), formError);
form.addEventListener("submit", create);

app.append(
  h("div", { class: "page-head" }, h("div", { class: "title" }, h("h1", {}, "API keys"),
    h("div", { class: "sub" }, allProjects ? "Keys of every project on this server"
      : `Keys within your projects: ${boot.projects.join(", ")}`))),
  secretBox,
  h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Create a key")),
    h("div", { class: "card-body" }, form)),
  h("section", { class: "card", style: { marginTop: "16px" } }, h("div", { class: "card-head" }, h("h2", {}, "Keys")),
    h("div", { class: "table-wrap" }, table)));
done();
load();
