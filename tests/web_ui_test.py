#!/usr/bin/env python3
"""The web chat page in headless Chromium (Selenium): load it, send a message, see a streamed
reply, press stop mid-reply. Usage: web_ui_test.py STRATA_BINARY MODEL.gguf.
Exit 77 (ctest: skipped) when Chromium, its driver or Selenium is missing."""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    print("SKIP: selenium is not installed")
    sys.exit(77)
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
driver_bin = shutil.which("chromedriver")
if not chromium or not driver_bin:
    print("SKIP: chromium / chromedriver not installed")
    sys.exit(77)

STRATA, MODEL = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    passed += bool(cond)
    failed += not cond
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else " " + detail))


proc = subprocess.Popen([STRATA, "serve", "-m", MODEL, "--port", "0", "--ctx", "4096", "-t", "2"], stderr=subprocess.PIPE, text=True)
port = int(re.search(r":(\d+)/", proc.stderr.readline()).group(1))
threading.Thread(target=proc.stderr.read, daemon=True).start()
base = f"http://127.0.0.1:{port}"
for _ in range(300):
    try:
        if urllib.request.urlopen(base + "/health").status == 200:
            break
    except Exception:
        time.sleep(0.1)

opts = webdriver.ChromeOptions()
opts.binary_location = chromium
for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1100,800"):
    opts.add_argument(a)
driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
try:
    driver.get(base + "/")
    check("page loads", driver.title == "Strata chat", driver.title)
    wait = WebDriverWait(driver, 60)
    box = driver.find_element(By.ID, "input")
    box.send_keys("Tell me a story")
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: d.find_element(By.ID, "send").is_enabled() and
               len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 1 and
               d.find_elements(By.CSS_SELECTOR, ".msg.assistant")[0].text.strip() != "")
    reply = driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")[0].text
    check("streamed reply appears", len(reply) > 10, repr(reply))
    check("live line shows tokens/s and KV use", "tok/s" in driver.find_element(By.ID, "stats").text and
          "KV" in driver.find_element(By.ID, "stats").text, driver.find_element(By.ID, "stats").text)
    shot = os.path.join(os.environ.get("TMPDIR", "/tmp"), "strata-web-ui.png")
    driver.save_screenshot(shot)

    # Stop a long reply midway.
    mt = driver.find_element(By.ID, "maxtok")
    mt.clear()
    mt.send_keys("3500")
    box.send_keys("Another story please")
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 2 and
               len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant")[1].text) > 20)
    driver.find_element(By.ID, "stop").click()
    wait.until(lambda d: "[stopped]" in d.find_elements(By.CSS_SELECTOR, ".msg.assistant")[1].text)
    check("stop button ends the reply", True)
    idle = False
    for _ in range(100):
        st = json.loads(urllib.request.urlopen(base + "/v1/status").read())
        if st["active"] == 0:
            idle = True
            break
        time.sleep(0.1)
    check("stopping frees the server's slot", idle and st["generated_tokens"] < 3000, repr(st))
finally:
    driver.quit()
    proc.terminate()
    proc.wait(10)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
