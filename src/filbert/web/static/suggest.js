// Search suggestions as the user types: /api/suggest under the search box.
//
// An ARIA combobox (https://www.w3.org/WAI/ARIA/apg/patterns/combobox/): the input owns a
// listbox positioned over the page (nothing below moves). ArrowDown/ArrowUp move the
// highlight (wrapping), Enter or a click on an option searches for it, Escape, Tab and
// leaving the box close the list. Requests are debounced, the previous one is aborted and
// a late answer for an older prefix is ignored; any error just hides the list. Phrases are
// set as text only (never markup). No inline code or styles: the page's CSP forbids both.
(() => {
  "use strict";

  const DELAY_MS = 120;
  const COUNT = 8;
  const input = document.getElementById("q");
  const list = document.getElementById("suggestions");
  if (!input || !list || !input.form || !window.fetch || !window.AbortController) {
    return;
  }
  const form = input.form;

  let timer = 0;            // the pending debounce
  let controller = null;    // the request in flight
  let latest = 0;           // number of the newest request: only its answer is shown
  let shownFor = null;      // the input value the options were fetched for
  let options = [];         // [{phrase, canonical, element}]
  let active = -1;          // index of the highlighted option, -1 for none

  input.setAttribute("role", "combobox");
  input.setAttribute("aria-autocomplete", "list");
  input.setAttribute("aria-controls", list.id);
  input.setAttribute("aria-expanded", "false");

  function isOpen() {
    return !list.hidden;
  }

  function cancel() {
    clearTimeout(timer);
    timer = 0;
    latest += 1;            // whatever is in flight is stale now
    if (controller) {
      controller.abort();
      controller = null;
    }
  }

  function close() {
    highlight(-1);
    list.hidden = true;
    input.setAttribute("aria-expanded", "false");
  }

  function open() {
    if (options.length) {
      list.hidden = false;
      input.setAttribute("aria-expanded", "true");
    }
  }

  function highlight(index) {
    if (active >= 0 && options[active]) {
      options[active].element.setAttribute("aria-selected", "false");
    }
    active = index;
    if (active >= 0 && options[active]) {
      const element = options[active].element;
      element.setAttribute("aria-selected", "true");
      input.setAttribute("aria-activedescendant", element.id);
      element.scrollIntoView({block: "nearest"});
    } else {
      input.removeAttribute("aria-activedescendant");
    }
  }

  function render(value, suggestions) {
    highlight(-1);
    list.replaceChildren();
    options = [];
    shownFor = value;
    suggestions.forEach((s) => {
      if (!s || typeof s.phrase !== "string" || !s.phrase) {
        return;
      }
      const item = document.createElement("li");
      item.id = `${list.id}-${options.length}`;
      item.className = "suggestion";
      item.setAttribute("role", "option");
      item.setAttribute("aria-selected", "false");
      const phrase = document.createElement("span");
      phrase.className = "phrase";
      phrase.textContent = s.phrase;
      item.append(phrase);
      const canonical = typeof s.canonical === "string" && s.canonical ? s.canonical : null;
      if (canonical) {
        const target = document.createElement("span");
        target.className = "canonical";
        target.textContent = canonical;
        item.append(document.createTextNode(" → "), target);
      }
      list.append(item);
      options.push({phrase: s.phrase, canonical, element: item});
    });
    if (options.length) {
      open();
    } else {
      close();
    }
  }

  async function fetchSuggestions() {
    cancel();
    const value = input.value;
    if (!value.trim()) {
      render(value, []);
      return;
    }
    const number = latest;
    controller = new AbortController();
    const url = `api/suggest?${new URLSearchParams({q: value, n: String(COUNT)})}`;
    try {
      const response = await fetch(url, {
        signal: controller.signal,
        headers: {Accept: "application/json"},
        credentials: "same-origin",
      });
      if (!response.ok) {
        throw new Error(`HTTP ${response.status}`);
      }
      const body = await response.json();
      if (number !== latest || input.value !== value) {
        return;             // an older prefix's answer, or the box changed meanwhile
      }
      controller = null;
      if (document.activeElement !== input) {
        return;             // the user has moved on
      }
      render(value, Array.isArray(body && body.suggestions) ? body.suggestions : []);
    } catch (error) {
      if (number === latest) {   // not aborted for a newer request: a real failure
        controller = null;
        render(value, []);
      }
    }
  }

  function choose(index) {
    const option = options[index];
    if (!option) {
      return;
    }
    cancel();
    input.value = option.phrase;
    close();
    if (typeof form.requestSubmit === "function") {
      form.requestSubmit();
    } else {
      form.submit();
    }
  }

  input.addEventListener("input", () => {
    cancel();
    if (!input.value.trim()) {
      render(input.value, []);
      return;
    }
    timer = setTimeout(fetchSuggestions, DELAY_MS);
  });

  input.addEventListener("keydown", (event) => {
    if (event.isComposing || event.altKey || event.ctrlKey || event.metaKey) {
      return;
    }
    switch (event.key) {
      case "ArrowDown":
      case "ArrowUp": {
        event.preventDefault();
        if (!isOpen()) {
          if (options.length && shownFor === input.value) {
            open();
          } else if (input.value.trim()) {
            fetchSuggestions();
          }
          return;
        }
        const n = options.length;
        const step = event.key === "ArrowDown" ? 1 : -1;
        const from = active < 0 ? (step > 0 ? -1 : n) : active;
        highlight((from + step + n) % n);
        return;
      }
      case "Enter":
        if (isOpen() && active >= 0) {
          event.preventDefault();
          choose(active);
        } else {
          cancel();         // a plain submit: no list popping up on the way out
          close();
        }
        return;
      case "Escape":
        if (isOpen()) {
          event.preventDefault();   // or a search input clears itself
          cancel();
          close();
        }
        return;
      case "Tab":
        cancel();
        close();
        return;
      default:
        return;
    }
  });

  input.addEventListener("blur", () => {
    cancel();
    close();
  });

  // keep the focus in the box on a click, so the blur does not close the list first
  list.addEventListener("mousedown", (event) => event.preventDefault());
  list.addEventListener("click", (event) => {
    const item = event.target instanceof Element ? event.target.closest("[role=option]") : null;
    const index = options.findIndex((o) => o.element === item);
    if (index >= 0) {
      choose(index);
    }
  });
  list.addEventListener("mousemove", (event) => {
    const item = event.target instanceof Element ? event.target.closest("[role=option]") : null;
    const index = options.findIndex((o) => o.element === item);
    if (index >= 0 && index !== active) {
      highlight(index);
    }
  });

  form.addEventListener("submit", () => {
    cancel();
    close();
  });

  // a page restored by Back must not show the list it was left with
  window.addEventListener("pageshow", () => {
    cancel();
    close();
  });
})();
