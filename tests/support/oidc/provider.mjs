// A standards-conformant OpenID Connect provider on loopback for the workbench's sign-in tests:
// the `oidc-provider` package (certified OpenID Provider library) with three people, a groups
// claim, PKCE required for every client, and a password form of our own in place of the
// library's development login (which accepts any password).
//
//   OIDC_PORT=PORT node tests/support/oidc/provider.mjs
//
// prints `oidc provider on http://127.0.0.1:PORT` once it listens. Clients register themselves
// through the standard dynamic registration endpoint (RFC 7591, `POST /reg`), so each workbench a
// test starts names its own redirect URI. Everything is in memory; nothing outlives the process.
//
// It is also a CI workload-identity issuer (docs/ci-principal.md): a client registered with
// `grant_types: ["client_credentials"]` and the metadata `ci_repository`, `ci_ref`, `ci_sha`,
// `ci_repository_id`, `ci_owner_id`, `ci_event`, `ci_workflow` (and `ci_lifetime`, seconds) gets, for
// `POST /token` with `grant_type=client_credentials&resource=<audience>` (RFC 8707 resource
// indicators), a signed JWT access token shaped like a GitHub Actions OIDC token: `iss`, `aud` (the
// resource), `sub` `repo:<repository>:ref:<ref>`, `repository`, `ref`, `sha`, `repository_id`,
// `repository_owner_id`, `event_name`, `job_workflow_ref`, `exp` (`iat` + `ci_lifetime`), `iat`.
import http from 'node:http';
import { generateKeyPairSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';

import Provider from 'oidc-provider';

const port = Number(process.env.OIDC_PORT);
if (!Number.isInteger(port) || port <= 0) {
  console.error('provider.mjs: set OIDC_PORT to the port to listen on');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

// The people (tests/browser/test_oidc_signin.py and tests/workbench/test_oidc.py sign in as them).
const ACCOUNTS = {
  alice: { password: 'alice-password', name: 'Alice Author', groups: ['gate-authors'] },
  bob: { password: 'bob-password', name: 'Bob Approver', groups: ['gate-approvers'] },
  carol: { password: 'carol-password', name: 'Carol Viewer', groups: ['gate-viewers'] },
};

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    // The CI issuer: client credentials, JWT access tokens for the resource (audience) asked for.
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      async getResourceServerInfo(_ctx, resourceIndicator) {
        return { scope: 'ci', audience: resourceIndicator, accessTokenFormat: 'jwt', accessTokenTTL: 600,
          jwt: { sign: { alg: 'RS256' } } };
      },
    },
    // RP-initiated logout: the workbench's /logout sends the browser here with id_token_hint and
    // its registered post_logout_redirect_uri; a page of our own asks to confirm (no web fonts).
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = `<!doctype html><title>Test provider sign-out</title><h1>Sign out of the test provider?</h1>
${form}<button type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>`;
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = '<!doctype html><title>Signed out</title><h1>Signed out of the test provider</h1>';
      },
    },
  },
  pkce: { required: () => true },
  // A CI client's repository, ref and commit (set at registration; tests/oidc_support.py `ci_token`).
  extraClientMetadata: {
    properties: ['ci_repository', 'ci_ref', 'ci_sha', 'ci_repository_id', 'ci_owner_id', 'ci_event', 'ci_workflow',
      'ci_lifetime'],
    validator(_ctx, key, value) {
      if (value !== undefined && (typeof value !== 'string' || value.length > 200)) {
        throw new Error(`${key} must be a string of at most 200 characters`);
      }
    },
  },
  formats: {
    customizers: {
      // The claims of a GitHub Actions OIDC token, from the client's registered CI metadata.
      async jwt(_ctx, token, structured) {
        const client = token.client;
        if (!client || client.ci_repository === undefined) return;
        Object.assign(structured.payload, {
          sub: `repo:${client.ci_repository}:ref:${client.ci_ref}`,
          repository: client.ci_repository, ref: client.ci_ref, sha: client.ci_sha,
          repository_id: client.ci_repository_id, repository_owner_id: client.ci_owner_id,
          event_name: client.ci_event, job_workflow_ref: client.ci_workflow,
        });
        if (client.ci_lifetime !== undefined) {
          structured.payload.exp = structured.payload.iat + Number(client.ci_lifetime);
        }
      },
    },
  },
  claims: { openid: ['sub'], profile: ['name', 'preferred_username'], groups: ['groups'] },
  // Scope claims in the ID token itself (many providers put groups there), not only at userinfo.
  conformIdTokenClaims: false,
  ttl: { Session: 3600, Interaction: 600, Grant: 3600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
  async findAccount(_ctx, id) {
    const account = Object.hasOwn(ACCOUNTS, id) ? ACCOUNTS[id] : undefined;
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, name: account.name, preferred_username: id, groups: account.groups };
      },
    };
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
});

function passwordMatches(user, password) {
  const account = Object.hasOwn(ACCOUNTS, user) ? ACCOUNTS[user] : undefined;
  const given = Buffer.from(String(password));
  const stored = Buffer.from(account ? account.password : 'no-such-account-password');
  return account !== undefined && given.length === stored.length && timingSafeEqual(given, stored);
}

function loginPage(res, uid, message) {
  res.writeHead(message ? 401 : 200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`<!doctype html><title>Test provider sign-in</title><h1>Test provider sign-in</h1>
<p id="message">${message}</p>
<form method="post" action="/interaction/${encodeURIComponent(uid)}/login">
<label>User <input name="login" autofocus></label>
<label>Password <input name="password" type="password"></label>
<button type="submit">Sign in</button></form>`);
}

async function formBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf-8'));
}

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params, session } = details;
  if (prompt.name === 'login') {
    if (req.method !== 'POST') return loginPage(res, uid, '');
    const form = await formBody(req);
    if (!passwordMatches(form.get('login'), form.get('password'))) {
      return loginPage(res, uid, 'Invalid user or password.');
    }
    return provider.interactionFinished(req, res, { login: { accountId: form.get('login') } },
      { mergeWithLastSubmission: false });
  }
  // consent: the test client may have what it asked for (a test provider has no one to ask)
  const grant = details.grantId ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  const grantId = await grant.save();
  return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((error) => {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`interaction failed: ${error.message}`);
    });
    return;
  }
  callback(req, res);
});
server.listen(port, '127.0.0.1');
await once(server, 'listening');
console.log(`oidc provider on ${issuer}`);
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
