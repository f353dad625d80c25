// Small controls the dashboard's views share: a button that asks for a second click before it
// acts, a <select> whose options follow a list, copying to the clipboard, and a history table.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});
  const { format } = ns;
  const CONFIRM_MS = 4000; // a destructive button asks for a second click within this

  // A button that acts on the second click: the first one asks (no dialog to block the page).
  ns.confirmClick = function confirmClick(button, question, action) {
    const label = button.textContent;
    let timer = null;
    button.addEventListener("click", () => {
      if (!button.dataset.confirming) {
        button.dataset.confirming = "1";
        button.textContent = question;
        timer = setTimeout(() => {
          delete button.dataset.confirming;
          button.textContent = label;
        }, CONFIRM_MS);
        return;
      }
      clearTimeout(timer);
      delete button.dataset.confirming;
      button.textContent = label;
      action();
    });
  };

  // Sets a <select>'s options from [value, text] pairs, only when they changed.
  ns.setOptions = function setOptions(select, pairs) {
    const key = JSON.stringify(pairs);
    if (select.dataset.options === key) return;
    const chosen = select.value;
    select.replaceChildren(...pairs.map(([value, text]) => new Option(text, value)));
    select.dataset.options = key;
    if (pairs.some(([value]) => value === chosen)) select.value = chosen;
  };

  ns.copyText = async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (_) {
      return false; // no clipboard permission: the text is shown to copy by hand
    }
  };

  ns.historyRows = function historyRows(tbody, entries) {
    tbody.replaceChildren(
      ...entries.map((entry) => {
        const row = tbody.ownerDocument.createElement("tr");
        const credit = entry.kind === "credit";
        const cells = [
          format.time(entry.at),
          credit ? "credit" : `session ${format.shortId(entry.session_id)}${entry.open ? " (live)" : ""}`,
          credit ? `+${format.number(entry.amount, 2)}` : `−${format.number(entry.spent, 2)}`,
          credit ? `key ${entry.idempotency_key || format.DASH}` : entry.session_id || "",
        ];
        cells.forEach((text, index) => {
          const cell = row.insertCell();
          cell.textContent = text;
          if (index === 2) cell.className = "num";
        });
        return row;
      }),
    );
  };
})();
