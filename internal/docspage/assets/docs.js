// The /docs page: Swagger UI over the service's /openapi.json, with the
// key a person gives kept in this tab's sessionStorage and sent as a
// bearer token on every request the page makes to the service (the
// document, the calls, the index of doors). Nothing is loaded from
// elsewhere.
//
// The document is behind the keys (its tools tell how the service is set
// up), so the page fetches it itself and hands it to Swagger UI only once
// it has it: on a service with keys, a person who has given none is asked
// for one, instead of meeting Swagger UI's "Failed to load API
// definition". A service without keys answers at once, and the page shows
// the document without asking.
"use strict";
(function () {
  const keyName = "toolsvc-key";
  const key = () => sessionStorage.getItem(keyName) || "";
  const withKey = (req) => {
    const k = key();
    if (k && !req.headers.Authorization) req.headers.Authorization = "Bearer " + k;
    return req;
  };
  const state = document.getElementById("key-state");
  const showState = () => { state.textContent = key() ? "key set for this tab" : ""; };
  const input = document.getElementById("key");
  const need = document.getElementById("need-key");
  const holder = document.getElementById("swagger-ui");

  // ask shows what the page needs instead of the operations: a key, a
  // key other than the one refused, or why the document did not load.
  function ask(text, refused) {
    need.textContent = text;
    need.classList.toggle("refused", refused);
    need.hidden = false;
    holder.hidden = true;
    input.focus();
  }

  let ui = null;
  function show(spec) {
    need.hidden = true;
    holder.hidden = false;
    if (ui) {
      ui.specActions.updateSpec(spec);
      return;
    }
    ui = SwaggerUIBundle({
      spec: JSON.parse(spec),
      dom_id: "#swagger-ui",
      deepLinking: true,
      tryItOutEnabled: true,
      displayRequestDuration: true,
      filter: true,
      validatorUrl: null,
      requestInterceptor: withKey,
    });
  }

  function loadDefinition() {
    const given = key() !== "";
    fetch("/openapi.json", withKey({ headers: { Accept: "application/json" } }))
      .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
      .then(show)
      .catch((status) => {
        if (status === 401 && !given) {
          ask("This service needs an API key: give one of its keys (TOOLSVC_API_KEYS) above, and the page lists every door and tool and lets you try them.", false);
        } else if (status === 401) {
          ask("The service refused this key (401 unauthorized): give one of TOOLSVC_API_KEYS.", true);
        } else {
          ask("The API definition did not load (" + status + "); see the service's log, or try again.", true);
        }
      });
  }

  // The index of doors (GET / as JSON), which needs the key like the doors.
  function showDoors() {
    const list = document.getElementById("doors");
    fetch("/", withKey({ headers: { Accept: "application/json" } }))
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then((idx) => {
        list.textContent = "";
        for (const [name, where] of Object.entries(idx.doors).sort()) {
          const li = document.createElement("li");
          li.textContent = name + ": " + where;
          list.appendChild(li);
        }
      })
      .catch((status) => {
        list.textContent = "";
        const li = document.createElement("li");
        li.textContent = status === 401 ? "Give the key to see them." : "The index did not load (" + status + ").";
        list.appendChild(li);
      });
  }

  document.getElementById("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(keyName, input.value.trim());
    input.value = "";
    showState();
    loadDefinition();
    showDoors();
  });
  showState();
  loadDefinition();
  showDoors();
})();
