// bench/tok.mjs - Hugging Face's JavaScript tokenizers (@huggingface/tokenizers) on the same
// text as bench-tok, one thread, the same JSON line (load_ms, encode_ms of the best round).
//   node bench/tok.mjs NPM_DIR TOKENIZER_DIR TEXT [ROUNDS]
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [npm, dir, file, r] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(path.join(npm,
	"node_modules/@huggingface/tokenizers/dist/tokenizers.mjs")).href);
const text = fs.readFileSync(file, "utf8");
const bytes = fs.statSync(file).size;
let t0 = performance.now();
const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"))),
	JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"))));
const load = performance.now() - t0;
let best = Infinity, n = 0;
for (let i = 0; i < Number(r || 3); i++) {
	t0 = performance.now();
	n = tok.encode(text, { add_special_tokens: false }).ids.length;
	best = Math.min(best, performance.now() - t0);
}
console.log(JSON.stringify({ mb_s: +(bytes / 1e6 / (best / 1e3)).toFixed(2),
	tok_s: Math.round(n / (best / 1e3)), tokens: n, bytes, load_ms: Math.round(load),
	encode_ms: +best.toFixed(1) }));
