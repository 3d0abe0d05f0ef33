/**
 * The dashboard's one script: auto-refresh of the pages that show live data (the jobs list, a job's
 * page, the live keys and the workers), which an operator can pause (remembered in the browser) and
 * which keeps the scroll position; the URL keeps the filters.
 *
 * A refresh never throws away what the operator is doing: when it is due, it is skipped (and tried
 * again one period later) while
 * - a form field has the focus (typing into a filter, a cancel reason),
 * - any form field differs from what it held when the page loaded (typed, then left unsubmitted; a
 *   field added later: from its default),
 * - a confirmation is open (an open `<dialog>`, an element marked `data-confirm`, or a `<details>`
 *   opened or closed since the page loaded),
 * - or text is selected on the page.
 * The page then says so next to the button ("held") until the refresh can run.
 *
 * It is served as a file and allowed by its hash in the CSP (`script-src 'sha256-…'`, the tag carries
 * the same `integrity`); without it the pages work, just without refreshing.
 *
 * @since 0.3.0
 */
import { createHash } from "node:crypto"

/** The script. The button it drives (and its note) are rendered hidden; the script shows the button. */
export const script = `(function(){
var b=document.getElementById("refresh");if(!b)return;
var note=document.getElementById("refresh-note");
var every=Number(b.getAttribute("data-every"))||10,key="warp-refresh-paused",spot="warp-scroll:"+location.pathname+location.search;
var paused=localStorage.getItem(key)==="1",timer=0,held="";
var y=sessionStorage.getItem(spot);if(y!==null){sessionStorage.removeItem(spot);var xy=y.split(",");window.scrollTo(Number(xy[1])||0,Number(xy[0])||0);}
var details=document.querySelectorAll("details"),opened=[];for(var i=0;i<details.length;i++)opened.push(details[i].open);
function fields(){return document.querySelectorAll("input,select,textarea");}
function state(el){
var t=(el.getAttribute("type")||"").toLowerCase();
if(t==="checkbox"||t==="radio")return String(el.checked);
if(el.tagName==="SELECT"){var o=[];for(var j=0;j<el.options.length;j++)o.push(el.options[j].selected?1:0);return o.join("");}
return el.value;}
function ignored(el){var t=(el.getAttribute("type")||"").toLowerCase();return el.disabled||t==="hidden"||t==="submit"||t==="button"||t==="reset"||t==="image";}
var loaded=fields(),initial=[];for(var n=0;n<loaded.length;n++)initial.push(state(loaded[n]));
function changed(el){
if(ignored(el))return false;
for(var q=0;q<loaded.length;q++){if(loaded[q]===el)return state(el)!==initial[q];}
var t=(el.getAttribute("type")||"").toLowerCase();
if(t==="checkbox"||t==="radio")return el.checked!==el.defaultChecked;
return el.tagName!=="SELECT"&&el.value!==el.defaultValue;}
function busy(){
var a=document.activeElement;
if(a&&a.matches&&a.matches("input:not([type=hidden]),select,textarea,[contenteditable]"))return "typing";
if(document.querySelector("dialog[open],[data-confirm]"))return "confirmation open";
for(var k=0;k<details.length;k++){if(details[k].open!==opened[k])return "section opened";}
var f=fields();for(var m=0;m<f.length;m++){if(changed(f[m]))return "unsent input";}
var s=window.getSelection&&window.getSelection();if(s&&String(s)!=="")return "text selected";
return "";}
function show(){
b.textContent=paused?"Resume auto-refresh":"Pause auto-refresh";b.setAttribute("aria-pressed",paused?"true":"false");
document.documentElement.setAttribute("data-refresh",paused?"paused":held!==""?"held":"on");
if(note){note.hidden=paused||held==="";note.textContent=held===""?"":"Auto-refresh waits: "+held;}}
function tick(){
held=busy();show();
if(held!==""){arm();return;}
sessionStorage.setItem(spot,String(window.scrollY)+","+String(window.scrollX));location.reload();}
function arm(){clearTimeout(timer);if(!paused)timer=setTimeout(tick,every*1000);}
function update(){if(held!==""){held=busy();show();}}
b.hidden=false;show();arm();
b.addEventListener("click",function(){paused=!paused;localStorage.setItem(key,paused?"1":"0");held="";show();arm();});
document.addEventListener("input",update);document.addEventListener("change",update);document.addEventListener("focusout",function(){setTimeout(update,0);});
})();
`

/** The script's SHA-256, base64 (for the CSP and the tag's `integrity`). */
export const hash = createHash("sha256").update(script).digest("base64")

/** Seconds between refreshes. */
export const everySeconds = 10
