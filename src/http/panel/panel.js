// hermesd control panel: what a script adds to pages that work without one.
// - The status page follows /ui/status/events (server-sent events) and updates itself.
// - The chat sends its form with fetch and shows the answer as it is written.
// Everything shown arrives escaped by the daemon (status) or is set as text (chat).
"use strict";

(function () {
  const live = document.querySelector("[data-events]");
  if (live && window.EventSource) {
    const events = new EventSource(live.dataset.events);
    events.addEventListener("status", function (e) {
      live.innerHTML = e.data;
    });
  }

  const form = document.getElementById("chat");
  if (!form || !window.fetch || !window.TextDecoder) {
    return;
  }
  const log = document.getElementById("log");
  const state = document.getElementById("state");
  const text = document.getElementById("text");

  function bubble(role) {
    const empty = document.getElementById("empty");
    if (empty) {
      empty.remove();
    }
    const div = document.createElement("div");
    div.className = "msg " + role;
    const head = document.createElement("div");
    head.className = "role";
    head.textContent = role;
    const body = document.createElement("span");
    div.append(head, body);
    log.append(div);
    return body;
  }

  // One SSE block ("event: x\ndata: y\n\n") as [event, data].
  function parse(block) {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) {
        event = line.slice(6).trim();
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      }
    }
    return [event, data.join("\n")];
  }

  text.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      form.requestSubmit();
    }
  });

  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    const said = text.value.trim();
    if (!said) {
      return;
    }
    const button = form.querySelector("button");
    button.disabled = true;
    state.textContent = "…";
    bubble("user").textContent = said;
    const answer = bubble("assistant");
    const body = new URLSearchParams(new FormData(form));
    text.value = "";
    try {
      const response = await fetch(form.action, {
        method: "POST",
        body: body,
        headers: { Accept: "text/event-stream" },
        credentials: "same-origin",
      });
      if (response.status === 403) {
        answer.parentElement.classList.add("bad");
        answer.textContent = "Not sent: the login ended. Load the page again to log in.";
        return;
      }
      const type = response.headers.get("Content-Type") || "";
      if (!response.ok || !response.body || !type.startsWith("text/event-stream")) {
        answer.parentElement.classList.add("bad");
        answer.textContent = type.startsWith("text/plain")
          ? await response.text()
          : "Not sent (" + response.status + ").";
        return;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let pending = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          break;
        }
        pending += decoder.decode(value, { stream: true }).replace(/\r/g, "");
        let end;
        while ((end = pending.indexOf("\n\n")) >= 0) {
          const [event, data] = parse(pending.slice(0, end));
          pending = pending.slice(end + 2);
          if (event === "delta") {
            answer.textContent += JSON.parse(data).text;
          } else if (event === "done") {
            const reply = JSON.parse(data);
            answer.textContent = reply.text;
            if (reply.error) {
              answer.parentElement.classList.add("bad");
            }
          }
        }
      }
    } catch (err) {
      answer.parentElement.classList.add("bad");
      answer.textContent = "The connection broke; the message was saved if it was sent.";
    } finally {
      button.disabled = false;
      state.textContent = "";
      text.focus();
    }
  });
})();
