// Reads a JSON array of texts on standard input and writes, as a JSON array, the ids
// llama3-tokenizer-js gives each (no BOS or EOS; special tokens in the text are parsed).
import tok from 'llama3-tokenizer-js';

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const texts = JSON.parse(input);
  process.stdout.write(JSON.stringify(texts.map((t) => tok.encode(t, { bos: false, eos: false }))));
});
