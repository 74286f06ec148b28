// The /docs page: Swagger UI over the service's /openapi.json, with the
// key a person gives kept in this tab's sessionStorage and sent as a
// bearer token on every request the page makes to the service (the
// document, the calls, the index of doors). Nothing is loaded from
// elsewhere.
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

  const ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    tryItOutEnabled: true,
    displayRequestDuration: true,
    filter: true,
    validatorUrl: null,
    requestInterceptor: withKey,
  });

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
    const input = document.getElementById("key");
    sessionStorage.setItem(keyName, input.value.trim());
    input.value = "";
    showState();
    ui.specActions.download("/openapi.json");
    showDoors();
  });
  showState();
  showDoors();
})();
