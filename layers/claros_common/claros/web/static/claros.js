// Claros web app: progressive enhancement, and the session's hand. Every page reads
// without this file; acting (any POST form) needs the hand this file keeps.
"use strict";

// The hand: a session secret that never travels in a cookie. A cookie reaches every port
// of the host (an agent's own local web server too); this origin's localStorage does not.
// Sign-in answers with a page carrying it (#claros-hand); every POST form sends it back
// (a fetch that changes state would send it as the X-Claros-Hand header).
const HAND_KEY = "claros-hand";

function readHand() {
  try {
    return window.localStorage.getItem(HAND_KEY);
  } catch {
    return null; // storage off: the server's 403 page says to sign in again
  }
}

function forgetHand() {
  try {
    window.localStorage.removeItem(HAND_KEY);
  } catch {
    // nothing kept, nothing to forget
  }
}

// Every POST form carries the hand as a hidden field, added as it is sent; signing out
// forgets it. Without a hand the form goes as it is, and the server explains.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  const submitter = event.submitter;
  const method = (submitter && submitter.hasAttribute("formmethod")
    ? submitter.formMethod : form.method).toLowerCase();
  if (method !== "post") return;
  const action = new URL(submitter && submitter.hasAttribute("formaction")
    ? submitter.formAction : form.action, window.location.href);
  if (action.origin !== window.location.origin) return; // the hand goes to this app only
  if (action.pathname === "/app/signout") {
    forgetHand();
    return;
  }
  const hand = readHand();
  if (!hand) return;
  let field = form.querySelector("input[type=hidden][name=hand]");
  if (!field) {
    field = document.createElement("input");
    field.type = "hidden";
    field.name = "hand";
    form.appendChild(field);
  }
  field.value = hand;
}, true);

document.addEventListener("DOMContentLoaded", () => {
  // The answer to a sign-in: keep the hand, then go on (the server checked the path).
  const signedIn = document.getElementById("claros-hand");
  if (signedIn && signedIn.dataset.hand) {
    try {
      window.localStorage.setItem(HAND_KEY, signedIn.dataset.hand);
    } catch {
      // storage off: reading works, acting will ask to sign in again
    }
    const next = signedIn.dataset.next || "/app";
    window.location.replace(next.startsWith("/app") && !next.startsWith("//") ? next : "/app");
    return;
  }

  // Times: the server writes UTC; show them in the viewer's own time and zone.
  const local = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", timeZoneName: "short",
  });
  for (const time of document.querySelectorAll("time[datetime]")) {
    const when = new Date(time.getAttribute("datetime"));
    if (Number.isNaN(when.getTime()) || time.dataset.local === "no") continue;
    time.title = time.textContent;
    time.textContent = local.format(when);
  }

  // Narrow screens show each table row as a card (claros.css, "Readable everywhere"):
  // every cell is labelled with its column's heading.
  for (const table of document.querySelectorAll("table")) {
    // Tables with a narrow layout of their own (Activity, a check's rules, Keys) keep it.
    if (table.matches(".stacked, .people-table")) continue;
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    if (!heads.length) continue;
    table.classList.add("stackable");
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.children].forEach((cell, i) => {
        if (heads[i] && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", heads[i]);
      });
    }
  }

  // Copy buttons: <button data-copy="id-of-input">.
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const field = document.getElementById(button.dataset.copy);
      if (!field) return;
      field.select();
      try {
        await navigator.clipboard.writeText(field.value);
        button.textContent = "Copied";
      } catch {
        button.textContent = "Press Ctrl+C";
      }
    });
  }

  // In AWS the export answers with a presigned URL of the file: follow it.
  for (const link of document.querySelectorAll("a[data-export='presigned']")) {
    link.addEventListener("click", async (event) => {
      event.preventDefault();
      link.setAttribute("aria-busy", "true");
      try {
        const answer = await fetch(link.href, { headers: { accept: "application/json" } });
        const body = await answer.json();
        if (body.url) window.location.assign(body.url);
      } finally {
        link.removeAttribute("aria-busy");
      }
    });
  }
});
