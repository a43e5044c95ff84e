/** Short messages at the bottom of the window, some with one action (Undo). */
export interface Toast {
  id: number;
  text: string;
  action?: { label: string; run: () => void };
  tone: 'info' | 'error';
}

export class Toasts {
  items = $state.raw<Toast[]>([]);
  #nextId = 1;

  show(text: string, options: { action?: Toast['action']; tone?: Toast['tone']; ms?: number } = {}): number {
    const id = this.#nextId++;
    const toast: Toast = { id, text, tone: options.tone ?? 'info', ...(options.action ? { action: options.action } : {}) };
    this.items = [...this.items, toast];
    setTimeout(() => this.dismiss(id), options.ms ?? (options.action ? 8000 : 4000));
    return id;
  }

  dismiss(id: number): void {
    this.items = this.items.filter((t) => t.id !== id);
  }
}

export const toasts = new Toasts();
