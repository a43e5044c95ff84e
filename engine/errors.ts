/**
 * Errors that the user's input caused (a bad plan, a corrupt snapshot, an impossible setting).
 * The edges (CLI, app) show `message` as it is: it names what is wrong and where. Anything else that is thrown
 * is a bug in memplan.
 */
export class InputError extends Error {
  /** Where in the input the problem is: a field path (`training.batch_size`) or a byte offset (`byte 1234`). */
  readonly where: string;

  constructor(where: string, problem: string) {
    super(where ? `${where}: ${problem}` : problem);
    this.name = 'InputError';
    this.where = where;
  }
}
