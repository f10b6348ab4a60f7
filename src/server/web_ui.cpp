// The chat page served at GET /: one self-contained HTML file (no build step, no external assets).
namespace strata::server {
extern const char* const kWebPage;
const char* const kWebPage = R"strata_html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Strata chat</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;display:flex;flex-direction:column;height:100vh;background:#f6f6f4}
header{padding:8px 16px;background:#20232a;color:#eee;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header label{font-size:13px} header input{width:70px}
#log{flex:1;overflow-y:auto;padding:16px}
.msg{max-width:800px;margin:8px auto;padding:10px 14px;border-radius:8px;white-space:pre-wrap;line-height:1.4}
.user{background:#dbe9ff}.assistant{background:#fff;border:1px solid #ddd}
form{display:flex;gap:8px;padding:12px 16px;background:#fff;border-top:1px solid #ddd}
textarea{flex:1;height:56px;font:inherit} button{padding:0 18px}
#stats{font-size:12px;color:#555;text-align:center;padding:4px}
</style></head><body>
<header><b>Strata</b><span id="model"></span>
<label>temperature <input id="temp" type="number" step="0.1" min="0" max="2" value="0.7"></label>
<label>max tokens <input id="maxtok" type="number" min="1" value="256"></label>
<label>API key <input id="key" type="password" style="width:120px"></label></header>
<div id="log"></div><div id="stats">ready</div>
<form id="f"><textarea id="input" placeholder="Type a message; Enter sends, Shift+Enter breaks the line"></textarea>
<button id="send" type="submit">Send</button><button id="stop" type="button" disabled>Stop</button></form>
<script>
const log=document.getElementById('log'),input=document.getElementById('input'),stats=document.getElementById('stats');
const sendBtn=document.getElementById('send'),stopBtn=document.getElementById('stop');
let history=[],controller=null;
function headers(){const h={'Content-Type':'application/json'};const k=document.getElementById('key').value;if(k)h['Authorization']='Bearer '+k;return h;}
function add(role,text){const d=document.createElement('div');d.className='msg '+role;d.textContent=text;log.appendChild(d);log.scrollTop=log.scrollHeight;return d;}
async function kvLine(){try{const r=await fetch('/v1/status',{headers:headers()});if(!r.ok)return '';const s=await r.json();
document.getElementById('model').textContent=s.model;return ' | KV '+(s.kv_bytes_in_use/1048576).toFixed(2)+' of '+(s.kv_bytes_capacity/1048576).toFixed(1)+' MiB ('+s.kv_format+')';}catch(e){return '';}}
async function send(text){
  history.push({role:'user',content:text});add('user',text);const out=add('assistant','');
  controller=new AbortController();sendBtn.disabled=true;stopBtn.disabled=false;
  const t0=performance.now();let n=0,reply='';
  try{
    const r=await fetch('/v1/chat/completions',{method:'POST',headers:headers(),signal:controller.signal,body:JSON.stringify({
      messages:history,stream:true,temperature:parseFloat(document.getElementById('temp').value),
      max_tokens:parseInt(document.getElementById('maxtok').value)})});
    if(!r.ok){out.textContent='error: '+(await r.json()).error.message;history.pop();return;}
    const reader=r.body.getReader(),dec=new TextDecoder();let buf='';
    for(;;){const {value,done}=await reader.read();if(done)break;buf+=dec.decode(value,{stream:true});
      let i;while((i=buf.indexOf('\n\n'))>=0){const line=buf.slice(0,i);buf=buf.slice(i+2);
        if(!line.startsWith('data: '))continue;const data=line.slice(6);if(data==='[DONE]')continue;
        const c=JSON.parse(data);const d=c.choices&&c.choices[0]&&c.choices[0].delta;
        if(d&&d.content){reply+=d.content;out.textContent=reply;n++;log.scrollTop=log.scrollHeight;
          stats.textContent=(n/((performance.now()-t0)/1000)).toFixed(1)+' tok/s, '+n+' chunks';}}}
  }catch(e){if(e.name!=='AbortError')out.textContent+='\n[error: '+e.message+']';else out.textContent+=' [stopped]';}
  finally{history.push({role:'assistant',content:reply});controller=null;sendBtn.disabled=false;stopBtn.disabled=true;
    stats.textContent=(n/((performance.now()-t0)/1000)).toFixed(1)+' tok/s'+await kvLine();}
}
document.getElementById('f').addEventListener('submit',e=>{e.preventDefault();const t=input.value.trim();if(!t||controller)return;input.value='';send(t);});
input.addEventListener('keydown',e=>{if(e.key==='Enter'&&!e.shiftKey){e.preventDefault();document.getElementById('f').requestSubmit();}});
stopBtn.addEventListener('click',()=>{if(controller)controller.abort();});
kvLine().then(s=>{if(s)stats.textContent='ready'+s;});
</script></body></html>
)strata_html";
}  // namespace strata::server
