// A real OpenID provider for gpucloud's sign-in tests (npm oidc-provider).
//
// Environment: PORT, CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, POST_LOGOUT_REDIRECT_URI, CLI_CLIENT_ID (optional: a
// public native client with PKCE for `kubectl oidc-login`, redirecting to http://localhost:8000 as kubelogin
// does), and USERS_FILE: a JSON
// object {login: {password, email, email_verified, name, groups, preferred_username}} read at every sign-in, so a test can change someone's groups
// between two logins. devInteractions draws the login form; the middleware below checks the password, which
// devInteractions alone would not.
import { readFileSync } from 'node:fs';
import * as querystring from 'node:querystring';

import Provider from 'oidc-provider';

const env = process.env;
const issuer = `http://127.0.0.1:${env.PORT}`;
const users = () => JSON.parse(readFileSync(env.USERS_FILE, 'utf8'));

const clients = [{
  client_id: env.CLIENT_ID,
  client_secret: env.CLIENT_SECRET,
  redirect_uris: [env.REDIRECT_URI],
  post_logout_redirect_uris: [env.POST_LOGOUT_REDIRECT_URI],
  token_endpoint_auth_method: 'client_secret_post',
}];
if (env.CLI_CLIENT_ID) {
  clients.push({
    client_id: env.CLI_CLIENT_ID,
    application_type: 'native',
    redirect_uris: ['http://localhost:8000', 'http://localhost:18000'],
    token_endpoint_auth_method: 'none',
  });
}

const provider = new Provider(issuer, {
  clients,
  // Claims in the ID token itself, as Keycloak puts them: a Kubernetes API server reads only the ID token.
  conformIdTokenClaims: false,
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  cookies: { keys: ['gpucloud-test-cookie-key'] },
  async findAccount(ctx, sub) {
    const user = users()[sub];
    if (!user) return undefined;
    return {
      accountId: sub,
      async claims() {
        return {
          sub, email: user.email, email_verified: user.email_verified ?? true, name: user.name,
          preferred_username: user.preferred_username ?? sub,
          groups: user.groups,
        };
      },
    };
  },
  // A first-party client: no consent screen.
  async loadExistingGrant(ctx) {
    const existing = ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (existing) {
      const grant = await ctx.oidc.provider.Grant.find(existing);
      if (grant) return grant;
    }
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});

provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && /^\/interaction\/[^/]+$/.test(ctx.path)) {
    const chunks = [];
    for await (const chunk of ctx.req) chunks.push(chunk);
    const raw = Buffer.concat(chunks).toString();
    const body = querystring.parse(raw);
    if (body.prompt === 'login') {
      const user = users()[body.login];
      if (!user || user.password !== body.password) {
        ctx.status = 401;
        ctx.type = 'html';
        ctx.body = '<!doctype html><title>Sign-in</title><p id="error">Wrong login or password.</p>';
        return;
      }
    }
    ctx.req.body = raw;
  }
  await next();
});

provider.listen(Number(env.PORT), '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});
