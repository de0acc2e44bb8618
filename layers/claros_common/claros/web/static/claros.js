// Claros web app: progressive enhancement only. Every page works without this file.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
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
