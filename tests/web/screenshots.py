"""Regenerate the screenshots in docs/screenshots/ (docs/web.md shows them).

    .venv/bin/python -m tests.web.screenshots [--out docs/screenshots] [--only NAME ...]

Starts the demo (``python -m claros.demo``, as ``make run`` does: the workspace, its keys
and the example agent's traffic) on a free port with a fresh data directory, waits for the
example agent to finish, then signs in with headless Chromium (Debian's chromium and
chromium-driver) and saves each page in ``PAGES`` at 1280 and 420 px wide. A page the
server does not have yet (its error page says "Not found") is skipped with a message, so
pages can be listed before they are built.

To add a page: one line in ``PAGES``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDTHS = (1280, 420)
AGENT_DONE = ("The example agent is done", "The example agent stopped")
START_TIMEOUT_S = 60.0
AGENT_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class Shot:
    name: str  # the file's stem: docs/screenshots/<name>-<width>.png
    path: str  # "{month}" is the current month (YYYY-MM)
    who: str  # the demo key that signs in: "admin", "person", or "" (signed out)
    what: str  # the caption in docs/web.md


# Every page worth a picture, in the order docs/web.md shows them.
PAGES: tuple[Shot, ...] = (
    Shot("sign-in", "/app/signin", "", "Sign-in"),
    Shot("home", "/app", "person", "Home, as Dana (a member)"),
    Shot("home-admin", "/app", "admin", "Home, as the admin"),
    Shot("activity", "/app/activity", "admin", "Activity: every check of the workspace"),
    Shot("check", "/app/checks/{check_id}", "admin", "One check, with its rules and facts"),
    Shot("asks", "/app/asks", "admin", "Asks: the whole queue"),
    Shot("rules", "/app/rules", "admin", "Rules and mappings"),
    Shot("app", "/app/apps/shop", "admin", "One app's tools"),
    Shot("keys", "/app/keys", "admin", "Keys & people"),
    Shot("evidence", "/app/evidence", "admin", "Evidence"),
    Shot("device", "/app/device", "person", "Device sign-in (claros login)"),
    Shot(
        "report",
        "/api/evidence/report?workflow_id=refunds&month={month}&format=html",
        "admin",
        "The monthly report, printable",
    ),
    Shot("not-found", "/app/no-such-page", "admin", "A page that does not exist"),
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_demo(data: Path) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    env = {**os.environ, "CLAROS_PORT": str(port), "CLAROS_DATA": str(data)}
    demo = subprocess.Popen(
        [sys.executable, "-m", "claros.demo"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    return demo, f"http://127.0.0.1:{port}"


def _wait_for_agent(demo: subprocess.Popen[str]) -> None:
    """Read the demo's output until the example agent has finished (or it exits)."""
    assert demo.stdout is not None
    deadline = time.monotonic() + AGENT_TIMEOUT_S
    for line in demo.stdout:
        if any(done in line for done in AGENT_DONE):
            return
        if time.monotonic() > deadline:
            raise SystemExit("screenshots: the example agent did not finish in time")
    raise SystemExit(f"screenshots: the demo exited ({demo.wait()}) before its agent was done")


def _browser(profile: Path) -> Any:
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-dev-shm-usage",
                 "--hide-scrollbars", "--window-size=1280,900",
                 f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    # The same zone for every run, so the pictures do not change with the machine's.
    driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Europe/Berlin"})
    return driver


def _sign_in(driver: Any, url: str, key: str) -> None:
    driver.delete_all_cookies()
    driver.get(f"{url}/app/signin")
    if key:
        driver.find_element(By.ID, "key").send_keys(key, Keys.ENTER)
        deadline = time.monotonic() + 10
        while "/app/signin" in driver.current_url and time.monotonic() < deadline:
            time.sleep(0.05)


def _first_check(driver: Any, url: str) -> str:
    """A stopped check of the demo's, for the check page: the first one Activity lists
    (empty while that page does not exist)."""
    driver.get(f"{url}/app/activity?result=stop")
    for link in driver.find_elements(By.CSS_SELECTOR, "a[href*='/app/checks/']"):
        href = str(link.get_attribute("href") or "")
        return href.rsplit("/app/checks/", 1)[1].split("?")[0].split("#")[0]
    return ""


def _save(driver: Any, out: Path, name: str) -> list[Path]:
    saved = []
    for width in WIDTHS:
        driver.set_window_size(width, 900)
        height = int(driver.execute_script("return document.documentElement.scrollHeight"))
        driver.set_window_size(width, max(600, min(height, 5000)))
        path = out / f"{name}-{width}.png"
        driver.save_screenshot(str(path))
        saved.append(path)
    driver.set_window_size(1280, 900)
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.web.screenshots")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--only", nargs="*", default=None, help="page names from PAGES")
    args = parser.parse_args(argv)
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        print("screenshots: needs chromium and chromium-driver", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="claros-shots-") as tmp:
        demo, url = _start_demo(Path(tmp) / "data")
        driver = None
        try:
            _wait_for_agent(demo)
            keys = json.loads((Path(tmp) / "data" / "demo-keys.json").read_text())
            driver = _browser(Path(tmp) / "profile")
            month = time.strftime("%Y-%m", time.gmtime())
            signed_in_as = None
            check_id = ""
            for shot in PAGES:
                if args.only and shot.name not in args.only:
                    continue
                if shot.who != signed_in_as:
                    _sign_in(driver, url, keys.get(shot.who, "") if shot.who else "")
                    signed_in_as = shot.who
                    check_id = check_id or (_first_check(driver, url) if shot.who else "")
                if "{check_id}" in shot.path and not check_id:
                    print(f"skipped {shot.name}: no stopped check listed in Activity")
                    continue
                driver.get(url + shot.path.format(month=month, check_id=check_id))
                heading = driver.find_elements(By.TAG_NAME, "h1")
                if shot.name != "not-found" and heading and heading[0].text == "Not found":
                    print(f"skipped {shot.name}: {shot.path} is not a page on this server yet")
                    continue
                for path in _save(driver, args.out, shot.name):
                    print(f"saved {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
        finally:
            if driver is not None:
                driver.quit()
            demo.terminate()
            try:
                demo.wait(timeout=15)
            except subprocess.TimeoutExpired:
                demo.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
