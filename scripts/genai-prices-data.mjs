// Prints the price data the npm package @pydantic/genai-prices bundles, in
// the format of genai-prices' data.json (a JSON list of providers and their
// models), for `herald prices import`:
//
//   npm install @pydantic/genai-prices
//   node scripts/genai-prices-data.mjs node_modules/@pydantic/genai-prices > genai-prices.json
//   herald prices import genai-prices.json
//
// waitForUpdate() answers the data in force, which is the bundled copy
// when no update was asked for (the package fetches nothing by itself).
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node genai-prices-data.mjs PATH/TO/node_modules/@pydantic/genai-prices');
  process.exit(2);
}
const pkg = await import(pathToFileURL(resolve(dir, 'dist/index.js')).href);
const providers = await pkg.waitForUpdate();
if (!Array.isArray(providers) || providers.length === 0) {
  console.error(`${dir}: no bundled price data`);
  process.exit(1);
}
process.stdout.write(JSON.stringify(providers));
