// The upload page: files to POST /v1/extract, the job polled until it ends, the selection and
// the reasons for what was left out shown. Everything the server returns came from untrusted
// files: it is only ever set as textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

function headers() {
  const key = $("key").value.trim();
  return key ? { Authorization: "Bearer " + key } : {};
}

function say(text) {
  $("status").textContent = text;
}

function show(selection) {
  $("selection").textContent = selection.text;
  $("revision").textContent = selection.revision ? "(" + selection.revision + ")" : "";
  $("selection-section").hidden = !selection.text;
  const list = $("omitted");
  list.replaceChildren();
  for (const [label, reason] of selection.dropped) {
    const item = document.createElement("li");
    const name = document.createElement("strong");
    name.textContent = label;
    item.append(name, ": " + reason);
    list.append(item);
  }
  $("omitted-section").hidden = selection.dropped.length === 0;
}

async function poll(url) {
  for (;;) {
    const response = await fetch(url, { headers: headers() });
    const status = await response.json();
    if (!response.ok) {
      say("Error: " + status.error.type + ": " + status.error.reason);
      return;
    }
    if (status.state === "done") {
      say("Done.");
      show(status.selection);
      return;
    }
    if (status.state !== "queued" && status.state !== "running") {
      say(status.state + (status.error ? ": " + status.error.reason : ""));
      return;
    }
    const pages = status.pages_total ? ", page " + status.pages_done + " of " + status.pages_total : "";
    say(status.state + ": " + status.files_done + " of " + status.files + " files" + pages);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

async function upload(files) {
  if (!files.length) return;
  const form = new FormData();
  for (const file of files) form.append("file", file, file.name);
  say("Uploading " + files.length + " file" + (files.length > 1 ? "s" : "") + "…");
  $("selection-section").hidden = true;
  $("omitted-section").hidden = true;
  const response = await fetch("/v1/extract?wait=0", { method: "POST", body: form, headers: headers() });
  const answer = await response.json();
  if (response.status === 202) return poll(answer.url);
  if (response.ok) {
    say("Done.");
    return show(answer);
  }
  say("Error " + response.status + ": " + answer.error.type + ": " + answer.error.reason);
}

function setUp() {
  const drop = $("drop");
  $("files").addEventListener("change", (event) => upload(event.target.files));
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    upload(event.dataTransfer.files);
  });
  fetch("/ui/settings").then((r) => r.json()).then((settings) => {
    $("key-row").hidden = !settings.keys;
  });
}

setUp();
