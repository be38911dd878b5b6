#!/usr/bin/env node
// The npm references of admit::redis::semaphore, measured as bench/redis_semaphore_bench.cpp measures admit's, for
// bench/redis_semaphore_compare.sh: acquire+release cycles/s with C contenders on a semaphore of capacity K, and the
// wake-up latency from a release to the queued waiter running. It never starts Redis.
//
//   node semaphore_bench.js --impl redis-semaphore --url redis://127.0.0.1:6379 --cycles 1:1,64:8 --wakeup-rounds 300
//
// The implementations (--impl), each with its default options:
// - redis-semaphore: its Semaphore (RedisSemaphore) on ioredis. A Semaphore object is one acquisition's identity, so
//   each contender has its own, all on one ioredis client (as one process would). acquire() runs a Lua script (drop
//   holders older than lockTimeout, ZADD if fewer than the limit) and, when full, sleeps retryInterval (10 ms by
//   default) and tries again until acquireTimeout (10 s): a poller, with no queue and no order among waiters.
//   release() is one ZREM.
// - bottleneck: Bottleneck in its Redis clustering mode (datastore "ioredis"), maxConcurrent as the capacity. It has
//   no acquire/release: a contender schedule()s a job, "acquired" when the job starts, "released" when the job's
//   promise settles (the holder's job is a promise that resolves when told to release). Waiting jobs are queued in
//   the limiter object of their process (Redis counts the running jobs and each client's number of queued jobs);
//   a job that ends runs Bottleneck's `free` script, which publishes the new capacity on a Pub/Sub channel to the
//   limiter (client) with queued jobs, which then drains its queue. schedule()'s promise settles after `free`.
//   The contenders of the cycles case share one limiter (one process); the wake-up case has two limiters with the same
//   id (two processes), each with its own connections.
//
// The cases (as admit_redis_semaphore_bench):
// - cycles C:K: C async contenders on capacity K, each looping acquire then release with nothing in between, for
//   --duration s after --warmup s; a cycle counts when its release completes in the window; the acquire latency
//   (call to holding) is recorded when the acquisition falls in the window. At the end, redis-semaphore's waits are
//   aborted (AbortSignal) and Bottleneck's queued jobs run out (neither counted as errors).
// - wakeup: capacity 1; the holder holds the permit, the waiter starts waiting; once the waiter is known to be waiting
//   in Redis (bottleneck: its client's queued count in Redis is 1; redis-semaphore, which keeps no waiters in Redis:
//   its first attempt was refused), --settle-ms plus U(0, --jitter-ms) ms later the holder reads the clock and
//   releases; the waiter reads the clock when it holds the permit (acquire() resolved; the job started). Then the
//   waiter releases; --wakeup-rounds rounds.
//
// - crowd C:K:H (--crowd; none by default): C async contenders on capacity K, each holding what it gets H ms, so
//   that K hold and C − K wait; the hand-off (from the release of a permit to the grant that takes it, paired in
//   order) and, on a '#' line, Redis's CPU time per grant over the window (INFO cpu).
//
// Output: tab-separated lines, as admit_redis_semaphore_bench's:
//   <impl> <variant> <cycles|wakeup> <contenders> <capacity> <repetition> <cycles/s> <p50 µs> <p99 µs> <mean µs>
//   <max µs> <samples> <errors> <fairness>
'use strict';

const { setMaxListeners } = require('events');
const Redis = require('ioredis');
const Semaphore = require('redis-semaphore').Semaphore;
const Bottleneck = require('bottleneck');

function usage(error) {
  if (error) console.error(`semaphore_bench.js: ${error}\n`);
  console.error('usage: node semaphore_bench.js --impl redis-semaphore|bottleneck [--url URL] [--cycles C:K,...]\n' +
    '                          [--duration S] [--warmup S] [--wakeup-rounds N] [--settle-ms MS] [--jitter-ms MS]\n' +
    '                          [--repetitions N] [--name NAME] [--crowd C:K:HOLD_MS,...]\n' +
    '--cycles none / --wakeup-rounds 0 skip a case. URL defaults to $ADMIT_REDIS_URL, else redis://127.0.0.1:6379.');
  process.exit(error ? 2 : 0);
}

function parseArgs(argv) {
  const s = {
    impl: null,
    url: process.env.ADMIT_REDIS_URL || 'redis://127.0.0.1:6379',
    cycles: [[1, 1], [64, 8]],
    duration: 3,
    warmup: 0.5,
    wakeupRounds: 300,
    settleMs: 2,
    jitterMs: 10,
    repetitions: 1,
    crowds: [],
    name: 'node-sem-bench',
  };
  const number = (flag, v, min) => {
    const n = Number(v);
    if (v === '' || !Number.isFinite(n) || n < min) usage(`${flag} expects a number >= ${min}, got '${v}'`);
    return n;
  };
  for (let i = 2; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === '-h' || flag === '--help') usage();
    if (i + 1 >= argv.length) usage(`${flag} needs a value`);
    const v = argv[++i];
    switch (flag) {
      case '--impl':
        if (v !== 'redis-semaphore' && v !== 'bottleneck') {
          usage(`--impl takes redis-semaphore or bottleneck, got '${v}'`);
        }
        s.impl = v;
        break;
      case '--url': s.url = v; break;
      case '--cycles':
        s.cycles = v === 'none' ? [] : v.split(',').map((c) => {
          const p = c.split(':');
          if (p.length !== 2) usage(`--cycles takes CONTENDERS:CAPACITY pairs, got '${c}'`);
          return [Math.floor(number(flag, p[0], 1)), Math.floor(number(flag, p[1], 1))];
        });
        break;
      case '--crowd':
        s.crowds = v === 'none' ? [] : v.split(',').map((c) => {
          const p = c.split(':');
          if (p.length !== 3) usage(`--crowd takes CONTENDERS:CAPACITY:HOLD_MS triples, got '${c}'`);
          return [Math.floor(number(flag, p[0], 1)), Math.floor(number(flag, p[1], 1)), number(flag, p[2], 0)];
        });
        break;
      case '--duration': s.duration = number(flag, v, 0.001); break;
      case '--warmup': s.warmup = number(flag, v, 0); break;
      case '--wakeup-rounds': s.wakeupRounds = Math.floor(number(flag, v, 0)); break;
      case '--settle-ms': s.settleMs = number(flag, v, 0); break;
      case '--jitter-ms': s.jitterMs = number(flag, v, 0); break;
      case '--repetitions': s.repetitions = Math.floor(number(flag, v, 1)); break;
      case '--name': s.name = v; break;
      default: usage(`unknown argument ${flag}`);
    }
  }
  if (!s.impl) usage('--impl is required');
  return s;
}

const now = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Nearest rank (as admit_redis_semaphore_bench), in µs; ns is an array of Numbers.
function summarize(ns) {
  if (ns.length === 0) return { p50: 0, p99: 0, mean: 0, max: 0 };
  ns.sort((a, b) => a - b);
  const at = (q) => ns[Math.min(ns.length, Math.max(1, Math.ceil(q * ns.length))) - 1] / 1000;
  const mean = ns.reduce((a, b) => a + b, 0) / ns.length / 1000;
  return { p50: at(0.5), p99: at(0.99), mean, max: ns[ns.length - 1] / 1000 };
}

// A seeded uniform [0, 1) (mulberry32), so that the release delays do not depend on Math.random's state.
function uniform(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function redisClient(url) {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', (e) => console.error(`semaphore_bench.js: redis: ${e.message}`));
  return client;
}

function bottleneckOptions(url, id, capacity, clear) {
  const u = new URL(url);
  const clientOptions = { host: u.hostname, port: Number(u.port || 6379) };
  if (u.pathname.length > 1) clientOptions.db = Number(u.pathname.slice(1));
  if (u.password) clientOptions.password = decodeURIComponent(u.password);
  return { id, maxConcurrent: capacity, datastore: 'ioredis', clearDatastore: clear, clientOptions, Redis };
}

// A Bottleneck limiter on Redis, ready, its errors logged.
async function bottleneckLimiter(url, id, capacity, clear) {
  const limiter = new Bottleneck(bottleneckOptions(url, id, capacity, clear));
  limiter.on('error', (e) => console.error(`semaphore_bench.js: bottleneck: ${e.message || e}`));
  await limiter.ready();
  return limiter;
}

function line(s, kase, contenders, capacity, rep, perS, sm, samples, errors, fairness) {
  console.log([s.impl, 'default', kase, contenders, capacity, rep, perS, sm.p50.toFixed(1), sm.p99.toFixed(1),
    sm.mean.toFixed(1), sm.max.toFixed(1), samples, errors, fairness].join('\t'));
}

// --- cycles -------------------------------------------------------------------------------------------------------

async function runCycles(s, contenders, capacity, rep) {
  const id = `${s.name}-cycles-${contenders}x${capacity}-${rep}-${process.pid}`;
  const start = now();
  const from = start + BigInt(Math.round(s.warmup * 1e9));
  const until = from + BigInt(Math.round(s.duration * 1e9));
  const latency = [];
  const cycles = new Array(contenders).fill(0);
  let errors = 0;
  let stop = false;
  const abort = new AbortController();
  setMaxListeners(contenders + 16, abort.signal); // one abort listener per waiting contender (redis-semaphore)

  let contender, teardown;
  if (s.impl === 'redis-semaphore') {
    const client = redisClient(s.url);
    await client.ping();
    contender = async (i) => {
      const sem = new Semaphore(client, id, capacity); // its defaults: retryInterval 10 ms, acquireTimeout 10 s
      while (!stop) {
        const t0 = now();
        try {
          await sem.acquire(abort.signal);
        } catch (e) {
          if (!abort.signal.aborted) errors++;
          continue;
        }
        const t1 = now();
        if (t1 >= from && t1 < until) latency.push(Number(t1 - t0));
        try {
          await sem.release();
        } catch (e) {
          errors++;
          continue;
        }
        const t2 = now();
        if (t2 >= from && t2 < until) cycles[i]++;
      }
    };
    teardown = () => client.quit();
  } else {
    const limiter = await bottleneckLimiter(s.url, id, capacity, true);
    contender = async (i) => {
      while (!stop) {
        const t0 = now();
        let t1 = null;
        try {
          await limiter.schedule(() => {
            t1 = now(); // holding the permit: the job runs; it ends (releases) at once
            return Promise.resolve();
          });
        } catch (e) {
          errors++;
          continue;
        }
        const t2 = now();
        if (t1 >= from && t1 < until) latency.push(Number(t1 - t0));
        if (t2 >= from && t2 < until) cycles[i]++;
      }
    };
    teardown = () => limiter.disconnect();
  }
  const running = Array.from({ length: contenders }, (_, i) => contender(i));
  await sleep(Number(until - now()) / 1e6);
  stop = true;
  abort.abort();
  await Promise.all(running);
  await teardown();

  const total = cycles.reduce((a, b) => a + b, 0);
  const mean = total / contenders;
  line(s, 'cycles', contenders, capacity, rep, Math.round(total / s.duration), summarize(latency), total, errors,
    (mean > 0 ? Math.min(...cycles) / mean : 0).toFixed(3));
}

// --- crowd --------------------------------------------------------------------------------------------------------

// Redis's CPU time so far (used_cpu_sys + used_cpu_user), in seconds.
async function redisCpu(client) {
  const info = await client.info('cpu');
  const field = (name) => Number((info.match(new RegExp(`^${name}:([0-9.]+)`, 'm')) || [])[1]);
  return field('used_cpu_sys') + field('used_cpu_user');
}

async function runCrowd(s, contenders, capacity, holdMs, rep) {
  const id = `${s.name}-crowd-${contenders}x${capacity}-${rep}-${process.pid}`;
  const from = now() + BigInt(Math.round((s.warmup * 1e3 + holdMs) * 1e6));
  const until = from + BigInt(Math.round(s.duration * 1e9));
  const freed = []; // when each permit given back was freed, oldest first
  const handoff = [];
  const grants = new Array(contenders).fill(0);
  let errors = 0;
  let stop = false;
  const abort = new AbortController();
  setMaxListeners(contenders + 16, abort.signal);
  // A grant takes the permit freed longest ago (every permit is taken as soon as it is free: there are always
  // waiters); the first K grants take permits nobody had freed.
  const granted = (i) => {
    const t = now();
    const inWindow = t >= from && t < until;
    if (freed.length > 0) {
      const f = freed.shift();
      if (inWindow) handoff.push(Number(t - f));
    }
    if (inWindow) grants[i]++;
  };
  const control = redisClient(s.url);
  await control.ping();
  let contender, teardown;
  if (s.impl === 'redis-semaphore') {
    const client = redisClient(s.url);
    await client.ping();
    contender = async (i) => {
      const sem = new Semaphore(client, id, capacity);
      while (!stop) {
        try {
          await sem.acquire(abort.signal);
        } catch (e) {
          if (!abort.signal.aborted) errors++;
          continue;
        }
        granted(i);
        await sleep(holdMs);
        freed.push(now());
        try {
          await sem.release();
        } catch (e) {
          errors++;
        }
      }
    };
    teardown = () => client.quit();
  } else {
    const limiter = await bottleneckLimiter(s.url, id, capacity, true);
    contender = async (i) => {
      while (!stop) {
        try {
          await limiter.schedule(async () => {
            granted(i);
            await sleep(holdMs);
            freed.push(now());
          });
        } catch (e) {
          errors++;
        }
      }
    };
    teardown = () => limiter.disconnect();
  }
  const running = Array.from({ length: contenders }, (_, i) => contender(i));
  await sleep(Number(from - now()) / 1e6);
  const cpuBefore = await redisCpu(control);
  await sleep(Number(until - now()) / 1e6);
  const cpuAfter = await redisCpu(control);
  stop = true;
  abort.abort();
  await Promise.all(running);
  await teardown();
  await control.quit();

  const total = grants.reduce((a, b) => a + b, 0);
  const cpuUs = (cpuAfter - cpuBefore) * 1e6;
  console.log(`# ${s.impl} crowd ${contenders}:${capacity} hold ${holdMs} ms rep ${rep}: redis cpu ` +
    `${(total > 0 ? cpuUs / total : -1).toFixed(1)} us per grant (${(cpuUs / 1e6).toFixed(3)} s of cpu, ${total} grants)`);
  const mean = total / contenders;
  line(s, 'crowd', contenders, capacity, rep, Math.round(total / s.duration), summarize(handoff), total, errors,
    (mean > 0 ? Math.min(...grants) / mean : 0).toFixed(3));
}

// --- wakeup -------------------------------------------------------------------------------------------------------

// The two parties of the wake-up case for one implementation: holderAcquire() resolves to a release function;
// waiterAcquire() resolves to {at, release} once the waiter holds the permit; waiting() resolves once the waiter is
// known to wait in Redis.
async function redisSemaphoreParties(s, id) {
  const holderClient = redisClient(s.url);
  const waiterClient = redisClient(s.url);
  await Promise.all([holderClient.ping(), waiterClient.ping()]);
  // Count the waiter's refused attempts: redis-semaphore keeps no waiter in Redis; a refused attempt (the script's 0)
  // is how it waits.
  let refused = 0;
  for (const method of ['evalsha', 'eval']) {
    const original = waiterClient[method].bind(waiterClient);
    waiterClient[method] = (...args) => original(...args).then((r) => {
      if (+r === 0) refused++;
      return r;
    });
  }
  let refusedBefore = 0;
  return {
    async holderAcquire() {
      const sem = new Semaphore(holderClient, id, 1);
      await sem.acquire();
      return () => sem.release();
    },
    waiterAcquire() {
      refusedBefore = refused;
      const sem = new Semaphore(waiterClient, id, 1);
      return sem.acquire().then(() => ({ at: now(), release: () => sem.release() }));
    },
    async waiting() {
      while (refused === refusedBefore) await sleep(0.2);
    },
    teardown: () => Promise.all([holderClient.quit(), waiterClient.quit()]),
  };
}

async function bottleneckParties(s, id) {
  const holder = await bottleneckLimiter(s.url, id, 1, true);
  const waiter = await bottleneckLimiter(s.url, id, 1, false);
  const control = redisClient(s.url);
  // A job that holds the permit until told to release; resolves (running) once it runs. `done` settles after
  // Bottleneck's `free`.
  const hold = (limiter) => new Promise((running) => {
    let release;
    const ended = new Promise((resolve) => { release = resolve; });
    const done = limiter.schedule(() => {
      running({ at: now(), release: () => { release(); return done; } });
      return ended;
    });
  });
  return {
    async holderAcquire() {
      const h = await hold(holder);
      return h.release;
    },
    waiterAcquire: () => hold(waiter),
    async waiting() {
      // Redis counts each client's queued jobs (Bottleneck's `submit` script); its register attempt was refused.
      const key = `b_${id}_client_num_queued`;
      for (;;) {
        if (Number(await control.hget(key, waiter._store.clientId)) >= 1) return;
        await sleep(0.2);
      }
    },
    teardown: () => Promise.all([holder.disconnect(), waiter.disconnect(), control.quit()]),
  };
}

async function runWakeup(s, rep) {
  const id = `${s.name}-wakeup-${rep}-${process.pid}`;
  const parties = s.impl === 'redis-semaphore' ? await redisSemaphoreParties(s, id) : await bottleneckParties(s, id);
  const random = uniform(0x5eed0000 + rep);
  const latency = [];
  let errors = 0;
  for (let round = 0; round < s.wakeupRounds; round++) {
    try {
      const release = await parties.holderAcquire();
      const acquired = parties.waiterAcquire();
      await parties.waiting();
      await sleep(s.settleMs + random() * s.jitterMs);
      const releasedAt = now();
      await release();
      const w = await acquired;
      latency.push(Number(w.at - releasedAt));
      await w.release();
    } catch (e) {
      errors++;
      console.error(`semaphore_bench.js: wakeup: ${e.message || e}`);
    }
  }
  await parties.teardown();
  line(s, 'wakeup', 1, 1, rep, '-', summarize(latency), latency.length, errors, '-');
}

async function main() {
  const s = parseArgs(process.argv);
  const versions = ['ioredis', s.impl].map((p) => `${p} ${require(`${p}/package.json`).version}`).join(', ');
  const options = s.impl === 'redis-semaphore' ? 'Semaphore defaults (retryInterval 10 ms, acquireTimeout 10 s, ' +
    'lockTimeout 10 s)' : 'Bottleneck defaults, datastore ioredis, maxConcurrent = capacity';
  console.log(`# ${s.impl}: ${options}; ${versions}; node ${process.version}; url ${s.url}`);
  console.log(`# cycles: ${s.duration.toFixed(1)} s window after ${s.warmup.toFixed(1)} s warm-up; wakeup: ` +
    `${s.wakeupRounds} rounds, release ${s.settleMs.toFixed(1)} ms + U(0, ${s.jitterMs.toFixed(1)}) ms after the ` +
    'waiter is waiting');
  console.log('# impl\tvariant\tcase\tcontenders\tcapacity\trep\tcycles_per_s\tp50_us\tp99_us\tmean_us\tmax_us\t' +
    'samples\terrors\tfairness');
  for (let rep = 1; rep <= s.repetitions; rep++) {
    for (const [contenders, capacity] of s.cycles) await runCycles(s, contenders, capacity, rep);
    for (const [contenders, capacity, holdMs] of s.crowds) await runCrowd(s, contenders, capacity, holdMs, rep);
    if (s.wakeupRounds > 0) await runWakeup(s, rep);
  }
}

main().then(() => process.exit(0), (e) => {
  console.error(`semaphore_bench.js: ${e.stack || e}`);
  process.exit(1);
});
