/**
 * What no page of the app may do, for every web contents it creates: navigate away, open windows, attach
 * webviews, get permissions (window-options.ts `allowPermission`). https links open in the system browser.
 */
import { app, session, shell } from 'electron';
import { allowPermission, isExternalLinkAllowed } from './security/window-options.ts';

export function setupSecurity(): void {
  session.defaultSession.setPermissionRequestHandler((_contents, permission, callback) => callback(allowPermission(permission)));
  session.defaultSession.setPermissionCheckHandler((_contents, permission) => allowPermission(permission));
  app.on('web-contents-created', (_event, contents) => {
    contents.on('will-navigate', (event) => event.preventDefault());
    contents.on('will-redirect', (event) => event.preventDefault());
    contents.on('will-attach-webview', (event) => event.preventDefault());
    contents.setWindowOpenHandler(({ url }) => {
      if (isExternalLinkAllowed(url)) void shell.openExternal(url);
      return { action: 'deny' };
    });
  });
}
