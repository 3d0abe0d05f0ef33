/**
 * The dashboard's one script: auto-refresh of the jobs list and a job's page, which an operator can
 * pause (remembered in the browser) and which keeps the scroll position; the URL keeps the filters.
 * It is served as a file and allowed by its hash in the CSP (`script-src 'sha256-…'`, the tag carries
 * the same `integrity`); without it the pages work, just without refreshing.
 *
 * @since 0.3.0
 */
import { createHash } from "node:crypto"

/** The script. The button it drives is rendered hidden; the script shows it. */
export const script = `(function(){
var b=document.getElementById("refresh");if(!b)return;
var every=Number(b.getAttribute("data-every"))||10,key="warp-refresh-paused",spot="warp-scroll:"+location.pathname+location.search;
var paused=localStorage.getItem(key)==="1",timer=0,typing=false;
var y=sessionStorage.getItem(spot);if(y!==null){sessionStorage.removeItem(spot);window.scrollTo(0,Number(y)||0);}
function show(){b.textContent=paused?"Resume auto-refresh":"Pause auto-refresh";b.setAttribute("aria-pressed",paused?"true":"false");document.documentElement.setAttribute("data-refresh",paused?"paused":"on");}
function arm(){clearTimeout(timer);if(!paused&&!typing)timer=setTimeout(function(){sessionStorage.setItem(spot,String(window.scrollY));location.reload();},every*1000);}
b.hidden=false;show();arm();
b.addEventListener("click",function(){paused=!paused;localStorage.setItem(key,paused?"1":"0");show();arm();});
document.addEventListener("focusin",function(e){if(e.target&&e.target.matches&&e.target.matches("input,select,textarea")){typing=true;arm();}});
document.addEventListener("focusout",function(){typing=false;arm();});
})();
`

/** The script's SHA-256, base64 (for the CSP and the tag's `integrity`). */
export const hash = createHash("sha256").update(script).digest("base64")

/** Seconds between refreshes. */
export const everySeconds = 10
