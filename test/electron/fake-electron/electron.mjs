/**
 * A stand-in for the `electron` module, for loading the built main process (out/main/index.js) under plain Node
 * (main-wiring.test.ts): each API the main process uses records what it was given in `globalThis.fakeElectron`.
 * Only what memplan calls is here; anything else is a TypeError, which is the point.
 */
const state = {
  userData: '/nonexistent',
  appListeners: {},
  schemes: null,
  protocolHandlers: {},
  ipcHandlers: {},
  windows: [],
  menu: null,
  permissionRequest: null,
  permissionCheck: null,
  sent: [],
  errorBoxes: [],
  messageBoxes: [],
  openedExternal: [],
  openedPaths: [],
  exitCode: null,
};
globalThis.fakeElectron = state;

export const app = {
  isPackaged: false,
  getPath: (name) => (name === 'userData' ? state.userData : '/nonexistent'),
  setPath: (name, value) => {
    if (name === 'userData') state.userData = value;
  },
  getVersion: () => '0.1.0',
  getLocale: () => 'en-US',
  getName: () => 'memplan',
  requestSingleInstanceLock: () => true,
  on(event, listener) {
    (state.appListeners[event] ??= []).push(listener);
    return app;
  },
  whenReady: () => Promise.resolve(),
  quit() {},
  exit(code) {
    state.exitCode = code;
  },
  setAboutPanelOptions() {},
};

export const protocol = {
  registerSchemesAsPrivileged(schemes) {
    state.schemes = schemes;
  },
  handle(scheme, handler) {
    state.protocolHandlers[scheme] = handler;
  },
};

export const ipcMain = {
  handle(channel, handler) {
    state.ipcHandlers[channel] = handler;
  },
};

export class BrowserWindow {
  constructor(options) {
    this.options = options;
    this.listeners = {};
    this.shown = false;
    this.url = null;
    this.webContents = { send: (channel, ...args) => state.sent.push([channel, ...args]) };
    state.windows.push(this);
  }
  once(event, listener) {
    (this.listeners[event] ??= []).push(listener);
  }
  on(event, listener) {
    (this.listeners[event] ??= []).push(listener);
  }
  emit(event) {
    for (const listener of this.listeners[event] ?? []) listener();
  }
  loadURL(url) {
    this.url = url;
    return Promise.resolve();
  }
  show() {
    this.shown = true;
  }
  isMinimized() {
    return false;
  }
  isMaximized() {
    return false;
  }
  maximize() {}
  getNormalBounds() {
    return { x: this.options.x ?? 10, y: this.options.y ?? 20, width: this.options.width, height: this.options.height };
  }
  restore() {}
  focus() {}
  static getFocusedWindow() {
    return state.windows[0] ?? null;
  }
  static getAllWindows() {
    return state.windows;
  }
}

export const Menu = {
  buildFromTemplate: (template) => ({ template }),
  setApplicationMenu(menu) {
    state.menu = menu;
  },
};

export const dialog = {
  showErrorBox(title, content) {
    state.errorBoxes.push({ title, content });
  },
  async showMessageBox(_window, options) {
    state.messageBoxes.push(options);
    return { response: 0 };
  },
  async showOpenDialog() {
    return { canceled: true, filePaths: [] };
  },
  async showSaveDialog() {
    return { canceled: true };
  },
};

export const nativeTheme = { shouldUseDarkColors: false };

export const screen = { getAllDisplays: () => [{ workArea: { x: 0, y: 0, width: 1920, height: 1080 } }] };

export const session = {
  defaultSession: {
    setPermissionRequestHandler(handler) {
      state.permissionRequest = handler;
    },
    setPermissionCheckHandler(handler) {
      state.permissionCheck = handler;
    },
  },
};

export const shell = {
  async openExternal(url) {
    state.openedExternal.push(url);
  },
  async openPath(path) {
    state.openedPaths.push(path);
    return '';
  },
};

export default { app, protocol, ipcMain, BrowserWindow, Menu, dialog, nativeTheme, screen, session, shell };
