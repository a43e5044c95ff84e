/**
 * The keyboard shortcuts: Ctrl/Cmd+Enter simulate, Ctrl/Cmd+S save (Shift: save as), Ctrl/Cmd+F or / search,
 * Ctrl/Cmd+B max batch. `/` only when no text field has focus, so it can still be typed.
 */
export type ShortcutCommand = 'simulate' | 'save' | 'save-as' | 'search' | 'max-batch' | 'new';

function typing(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el) return false;
  return el.isContentEditable || el.tagName === 'TEXTAREA' || (el.tagName === 'INPUT' && !['checkbox', 'radio', 'button'].includes((el as HTMLInputElement).type)) || el.tagName === 'SELECT';
}

export function shortcutFor(e: KeyboardEvent): ShortcutCommand | null {
  const mod = e.ctrlKey || e.metaKey;
  if (mod && !e.altKey) {
    switch (e.key.toLowerCase()) {
      case 'enter':
        return 'simulate';
      case 's':
        return e.shiftKey ? 'save-as' : 'save';
      case 'f':
        return 'search';
      case 'b':
        return 'max-batch';
      case 'n':
        return 'new';
    }
    return null;
  }
  if (e.key === '/' && !e.altKey && !typing(e.target)) return 'search';
  return null;
}

/** "Ctrl+S" or "⌘S", as the platform writes shortcuts. */
export function shortcutLabel(key: string): string {
  const mac = typeof navigator !== 'undefined' && /Mac|iPhone|iPad/.test(navigator.platform);
  return mac ? `⌘${key}` : `Ctrl+${key}`;
}
