// A small STOMP 1.2 client over WebSocket, for the Manual Scheduler: it connects, subscribes (each
// SUBSCRIBE with a receipt, so the caller knows when messages start to flow), keeps heart-beats both ways
// and reconnects with exponential backoff until stopped. Subscriptions live as long as one connection:
// on every (re)connect `onConnect` runs, and the caller subscribes again and re-reads what it may have
// missed. esi's topics only deliver; this client never SENDs.

const NUL = 0;
const LF = 10;
const CR = 13;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

// Header escaping of STOMP 1.2 (not applied to CONNECT and CONNECTED, which 1.0 peers must read).
const ESCAPES = { '\\': '\\\\', '\r': '\\r', '\n': '\\n', ':': '\\c' };
const UNESCAPES = { '\\\\': '\\', '\\r': '\r', '\\n': '\n', '\\c': ':' };
const escape = (text) => text.replace(/[\\\r\n:]/g, (c) => ESCAPES[c]);
const unescape = (text) => text.replace(/\\./g, (s) => UNESCAPES[s] ?? s);

/** One STOMP frame: command, headers (first occurrence wins) and body text. */
export class Frame {
  constructor(command, headers = {}, body = '') {
    this.command = command;
    this.headers = headers;
    this.body = body;
  }

  /** The frame as the text of one WebSocket message. */
  encode() {
    const raw = this.command === 'CONNECT' || this.command === 'STOMP';
    const lines = [this.command];
    for (const [name, value] of Object.entries(this.headers)) {
      lines.push(raw ? `${name}:${value}` : `${escape(name)}:${escape(String(value))}`);
    }
    return `${lines.join('\n')}\n\n${this.body}\0`;
  }
}

/** Turns the bytes of WebSocket messages, in whatever pieces, into frames; heart-beat EOLs are skipped. */
export class FrameParser {
  constructor() {
    this.buffer = new Uint8Array(0);
  }

  /** Every frame completed by `data` (a string or bytes). Throws on a malformed frame. */
  feed(data) {
    const bytes = typeof data === 'string' ? encoder.encode(data) : new Uint8Array(data);
    const joined = new Uint8Array(this.buffer.length + bytes.length);
    joined.set(this.buffer);
    joined.set(bytes, this.buffer.length);
    this.buffer = joined;
    const frames = [];
    for (;;) {
      let start = 0;
      while (start < this.buffer.length && (this.buffer[start] === LF || this.buffer[start] === CR)) start += 1;
      this.buffer = this.buffer.subarray(start);
      const frame = this.#next();
      if (frame === null) return frames;
      frames.push(frame);
    }
  }

  #next() {
    const buffer = this.buffer;
    const lines = [];
    let position = 0;
    for (;;) {
      const end = buffer.indexOf(LF, position);
      if (end < 0) return null;
      const line = decoder.decode(buffer.subarray(position, end > position && buffer[end - 1] === CR ? end - 1 : end));
      position = end + 1;
      if (line === '') break;
      lines.push(line);
    }
    const command = lines.shift();
    if (!command) throw new Error('a frame without a command');
    const raw = command === 'CONNECTED';
    const headers = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon < 0) throw new Error(`a header line without ':' in a ${command} frame`);
      const name = raw ? line.slice(0, colon) : unescape(line.slice(0, colon));
      if (!(name in headers)) headers[name] = raw ? line.slice(colon + 1) : unescape(line.slice(colon + 1));
    }
    let bodyEnd;
    if ('content-length' in headers) {
      bodyEnd = position + Number.parseInt(headers['content-length'], 10);
      if (!Number.isFinite(bodyEnd)) throw new Error(`a bad content-length in a ${command} frame`);
      if (buffer.length <= bodyEnd) return null;
      if (buffer[bodyEnd] !== NUL) throw new Error(`a ${command} frame longer than its content-length`);
    } else {
      bodyEnd = buffer.indexOf(NUL, position);
      if (bodyEnd < 0) return null;
    }
    const body = decoder.decode(buffer.subarray(position, bodyEnd));
    this.buffer = buffer.subarray(bodyEnd + 1);
    return new Frame(command, headers, body);
  }
}

/** The error a receipt promise is rejected with when the server refuses, or the connection is lost. */
export class StompError extends Error {
  constructor(message, frame = null) {
    super(message);
    this.name = 'StompError';
    this.frame = frame;
  }
}

/**
 * A STOMP session that keeps itself connected.
 *
 * options: url (a ws:// or wss:// URL, the token in it if any), connectHeaders, heartbeat [send, receive] in
 * ms, backoff {initial, max} in ms, and the callbacks onStatus({state, attempt, delay, reason}) with state
 * connecting | connected | reconnecting | stopped, onConnect(headers of CONNECTED) and onError(frame) for
 * the server's ERROR frames (the server closes the session after one).
 */
export class StompClient {
  constructor(options) {
    this.options = { heartbeat: [10000, 10000], backoff: { initial: 500, max: 15000 }, connectHeaders: {}, ...options };
    this.socket = null;
    this.connected = false;
    this.stopped = true;
    this.attempt = 0;
    this.subscriptions = new Map();
    this.receipts = new Map();
    this.ids = 0;
    this.timers = [];
    this.retry = null;
  }

  /** Start connecting (and reconnecting whenever the connection is lost) until `stop`. */
  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.attempt = 0;
    this.#open();
  }

  /** Disconnect and stay disconnected; `reason` is shown in the status. */
  stop(reason = 'stopped') {
    this.stopped = true;
    clearTimeout(this.retry);
    const socket = this.socket;
    if (socket !== null) {
      if (this.connected && socket.readyState === WebSocket.OPEN) socket.send(new Frame('DISCONNECT').encode());
      this.#drop(reason);
      this.socket = null;
      socket.close(1000, 'stopped');
    }
    this.#status({ state: 'stopped', reason });
  }

  /** Reconnect now (e.g. after a change of token), whatever the current state. */
  restart() {
    this.stop('restarting');
    this.start();
  }

  /**
   * Subscribe `onMessage(body, frame)` to `destination`; resolves to the subscription id once the server
   * confirmed it (messages published from then on are delivered), rejects if refused or disconnected.
   */
  subscribe(destination, headers, onMessage) {
    if (!this.connected) return Promise.reject(new StompError('not connected'));
    this.ids += 1;
    const id = `sub-${this.ids}`;
    this.subscriptions.set(id, onMessage);
    const receipt = `receipt-${id}`;
    const confirmed = new Promise((resolve, reject) => this.receipts.set(receipt, { resolve, reject }));
    this.#send(new Frame('SUBSCRIBE', { ...headers, id, destination, ack: 'auto', receipt }));
    return confirmed.then(() => id);
  }

  /** Stop the messages of a subscription (a no-op for an unknown or already dropped id). */
  unsubscribe(id) {
    if (!this.subscriptions.delete(id) || !this.connected) return;
    this.#send(new Frame('UNSUBSCRIBE', { id }));
  }

  #status(status) {
    this.options.onStatus?.(status);
  }

  #send(frame) {
    this.socket.send(frame.encode());
  }

  #open() {
    this.#status({ state: this.attempt === 0 ? 'connecting' : 'reconnecting', attempt: this.attempt });
    const socket = new WebSocket(this.options.url, ['v12.stomp']);
    const parser = new FrameParser();
    this.socket = socket;
    let lastReceived = Date.now();
    const current = () => this.socket === socket;
    socket.onopen = () => {
      if (!current()) return;
      const [send, receive] = this.options.heartbeat;
      const headers = { 'accept-version': '1.2', host: location.hostname, 'heart-beat': `${send},${receive}` };
      this.#send(new Frame('CONNECT', { ...headers, ...this.options.connectHeaders }));
      // No CONNECTED in time: treat as a lost connection.
      this.timers.push(setTimeout(() => current() && !this.connected && socket.close(4000, 'no CONNECTED'), 10000));
    };
    socket.onmessage = (event) => {
      if (!current()) return;
      lastReceived = Date.now();
      let frames;
      try {
        frames = parser.feed(event.data);
      } catch (error) {
        this.options.onError?.(new Frame('ERROR', { message: `unreadable frame from esi: ${error.message}` }));
        socket.close(4000, 'malformed frame');
        return;
      }
      for (const frame of frames) this.#handle(frame, () => lastReceived);
    };
    socket.onclose = (event) => {
      if (!current()) return;
      this.#drop(event.reason || `connection closed (${event.code})`);
      this.socket = null;
      if (this.stopped) return;
      const { initial, max } = this.options.backoff;
      const delay = Math.min(max, initial * 2 ** this.attempt) * (0.5 + Math.random() / 2);
      this.attempt += 1;
      this.#status({ state: 'reconnecting', attempt: this.attempt, delay, reason: event.reason || `code ${event.code}` });
      this.retry = setTimeout(() => this.#open(), delay);
    };
  }

  #handle(frame, lastReceived) {
    switch (frame.command) {
      case 'CONNECTED':
        this.connected = true;
        this.attempt = 0;
        this.#heartbeat(frame.headers['heart-beat'], lastReceived);
        this.#status({ state: 'connected', session: frame.headers.session });
        this.options.onConnect?.(frame.headers);
        break;
      case 'MESSAGE': {
        const onMessage = this.subscriptions.get(frame.headers.subscription);
        if (onMessage) onMessage(frame.body, frame);
        break;
      }
      case 'RECEIPT': {
        const waiting = this.receipts.get(frame.headers['receipt-id']);
        this.receipts.delete(frame.headers['receipt-id']);
        waiting?.resolve();
        break;
      }
      case 'ERROR': {
        const waiting = this.receipts.get(frame.headers['receipt-id']);
        this.receipts.delete(frame.headers['receipt-id']);
        waiting?.reject(new StompError(frame.headers.message || 'refused by esi', frame));
        this.options.onError?.(frame);
        break;
      }
      default:
        break;
    }
  }

  // Heart-beats as negotiated (STOMP 1.2 §heart-beating): we send every max(ours, theirs wanted); the
  // server is given twice its period (and a second of slack for a busy machine) before we call it dead.
  #heartbeat(header, lastReceived) {
    const [serverSends, serverWants] = (header || '0,0').split(',').map((n) => Number.parseInt(n, 10) || 0);
    const [weSend, weWant] = this.options.heartbeat;
    const socket = this.socket;
    if (weSend > 0 && serverWants > 0) {
      const every = Math.max(weSend, serverWants);
      this.timers.push(setInterval(() => socket.readyState === WebSocket.OPEN && socket.send('\n'), every));
    }
    if (weWant > 0 && serverSends > 0) {
      const every = Math.max(weWant, serverSends);
      const check = () => {
        if (Date.now() - lastReceived() > 2 * every + 1000) socket.close(4000, 'heart-beat timeout');
      };
      this.timers.push(setInterval(check, every / 2));
    }
  }

  // The connection is gone: its timers, subscriptions and pending receipts with it.
  #drop(reason) {
    for (const timer of this.timers) {
      clearTimeout(timer);
      clearInterval(timer);
    }
    this.timers = [];
    this.connected = false;
    this.subscriptions.clear();
    for (const waiting of this.receipts.values()) waiting.reject(new StompError(`disconnected: ${reason}`));
    this.receipts.clear();
  }
}
