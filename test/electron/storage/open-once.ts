/**
 * Opens plans.sqlite as the app does (openStorage), lists the plans and prints the migrations it applied, as JSON.
 * database.test.ts starts several at once on a new file. Run with Node 24: `node open-once.ts <database>`.
 */
import { openDatabase } from '../../../electron/main/storage/database.ts';

const path = process.argv[2];
if (!path) throw new Error('usage: open-once.ts <database>');
const { db, migrated } = openDatabase(path);
const plans = (db.prepare('SELECT count(*) AS n FROM plans').get() as { n: number }).n;
db.close();
process.stdout.write(JSON.stringify({ migrated, plans }) + '\n');
