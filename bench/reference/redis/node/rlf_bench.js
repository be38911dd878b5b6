#!/usr/bin/env node
// rate-limiter-flexible's RateLimiterRedis over one ioredis connection: decisions/s and p50/p99 latency with 1, 64
// and 512 concurrent callers (async loops, each awaiting consume()), on one hot key and on many keys — the same cases
// as bench/redis_bench.cpp, for bench/redis_compare.sh. It never starts Redis.
//
//   node rlf_bench.js --url redis://127.0.0.1:6379 --callers 1,64,512 --keys hot,many --duration 3
//
// The limiter: RateLimiterRedis({points: 1000, duration: 1}), a fixed window of 1000 per second per key (its only
// algorithm; one Lua script per consume: SET NX EX + INCRBY + PTTL), the nominal limit admit's GCRA gets (1000/s,
// burst 1000). A refusal is a rejected promise carrying a RateLimiterRes; a Redis error is a rejected Error.
// --auto-pipelining turns on ioredis's enableAutoPipelining (commands issued in the same event-loop tick go out in
// one write); by default every command is its own socket write, still without waiting for earlier replies.
//
// Output: tab-separated lines, as admit_redis_bench's:
//   rlf <default|autopipelining> <hot|many> <callers> <repetition> <decisions/s> <p50 µs> <p99 µs> <admitted share>
//   <errors> - <client CPU µs per decision>
'use strict';

const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');

function parseArgs(argv) {
  const s = {
    url: process.env.ADMIT_REDIS_URL || 'redis://127.0.0.1:6379',
    callers: [1, 64, 512],
    keys: ['hot', 'many'],
    keyCount: 100000,
    duration: 3,
    warmup: 0.5,
    repetitions: 1,
    autoPipelining: false,
  };
  for (let i = 2; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
      return argv[++i];
    };
    switch (flag) {
      case '--url': s.url = value(); break;
      case '--callers': s.callers = value().split(',').map(Number); break;
      case '--keys': s.keys = value().split(','); break;
      case '--key-count': s.keyCount = Number(value()); break;
      case '--duration': s.duration = Number(value()); break;
      case '--warmup': s.warmup = Number(value()); break;
      case '--repetitions': s.repetitions = Number(value()); break;
      case '--auto-pipelining': s.autoPipelining = true; break;
      case '-h': case '--help':
        console.log('usage: node rlf_bench.js [--url URL] [--callers 1,64,512] [--keys hot,many] [--key-count N]\n' +
          '                        [--duration S] [--warmup S] [--repetitions N] [--auto-pipelining]');
        process.exit(0);
        break;
      default: throw new Error(`unknown argument ${flag}`);
    }
  }
  return s;
}

// Nearest rank, as admit_redis_bench.
function percentileUs(sorted, q) {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] / 1000;
}

// xorshift64* over BigInt would be slow; a 32-bit xorshift is enough to spread 100k keys.
function keyPicker(hot, count) {
  if (hot) return () => 'hot';
  const keys = new Array(count);
  for (let i = 0; i < count; i++) keys[i] = 'k' + String(i).padStart(12, '0');
  let x = 0x9e3779b9;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return keys[x % count];
  };
}

async function runCase(s, limiter, keyMode, callers, rep, variant) {
  const pick = keyPicker(keyMode === 'hot', s.keyCount);
  const start = process.hrtime.bigint();
  const from = start + BigInt(Math.round(s.warmup * 1e9));
  const until = from + BigInt(Math.round(s.duration * 1e9));
  let decisions = 0, admitted = 0, errors = 0;
  const latency = [];
  let cpuBefore = null, cpuAfter = null;

  async function caller() {
    for (;;) {
      const t0 = process.hrtime.bigint();
      let ok = false, error = false;
      try {
        await limiter.consume(pick(), 1);
        ok = true;
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) error = true;
      }
      const end = process.hrtime.bigint();
      if (end >= from && cpuBefore === null) cpuBefore = process.cpuUsage();
      if (end >= from && end < until) {
        if (error) {
          errors++;
        } else {
          decisions++;
          if (ok) admitted++;
          latency.push(Number(end - t0));
        }
      }
      if (end >= until) {
        if (cpuAfter === null) cpuAfter = process.cpuUsage(cpuBefore);
        return;
      }
    }
  }
  await Promise.all(Array.from({ length: callers }, caller));
  const window = s.duration;
  latency.sort((a, b) => a - b);
  const cpuUs = cpuAfter && decisions > 0 ? (cpuAfter.user + cpuAfter.system) / decisions : 0;
  console.log(['rlf', variant, keyMode, callers, rep, Math.round(decisions / window),
    percentileUs(latency, 0.5).toFixed(1), percentileUs(latency, 0.99).toFixed(1),
    (decisions > 0 ? admitted / decisions : 0).toFixed(4), errors, '-', cpuUs.toFixed(2)].join('\t'));
}

async function main() {
  const s = parseArgs(process.argv);
  const variant = s.autoPipelining ? 'autopipelining' : 'default';
  const client = new Redis(s.url, { enableAutoPipelining: s.autoPipelining, maxRetriesPerRequest: 1 });
  client.on('error', (e) => console.error(`rlf_bench: redis: ${e.message}`));
  const limiter = new RateLimiterRedis({ storeClient: client, points: 1000, duration: 1, keyPrefix: 'rlf' });
  console.log(`# rate-limiter-flexible RateLimiterRedis points 1000 duration 1 s, ioredis ${variant}, url ${s.url}`);
  for (let rep = 1; rep <= s.repetitions; rep++) {
    for (const keyMode of s.keys) {
      for (const callers of s.callers) await runCase(s, limiter, keyMode, callers, rep, variant);
    }
  }
  client.disconnect();
}

main().catch((e) => {
  console.error(`rlf_bench: ${e.stack || e}`);
  process.exit(1);
});
