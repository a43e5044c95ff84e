/**
 * Why two plans need different memory: "B saves 9.3 GiB, 7.1 of them from checkpointing". The difference between
 * a base plan and another is split over the settings in which they differ (settings.ts) by simulating the base
 * with each single setting of the other, as the advice simulates each change it considers (search/advice.ts): an
 * attribution is measured, never estimated. What no single change explains (changes that act together: half the
 * batch *and* checkpointing save less than each alone suggests) is `interaction_bytes`.
 *
 * Three steps, so that a host can run the simulations where it likes (the renderer sends them to the engine
 * worker one by one): `attributionVariants` names the plans to simulate, the host measures each, and
 * `attributeDifference` folds the measures into ids with numbers that the renderer words. `attribute` does all
 * three with `simulate` (the CLI, tests).
 */
import { InputError } from '../errors.ts';
import type { DeviceSpec } from '../gpu/device.ts';
import { pytorchFailure } from '../plan/parse.ts';
import type { Plan } from '../plan/schema.ts';
import { simulate } from '../train/simulate.ts';
import { differingSettings, settingOf, withSettingOf, type SettingKey, type SettingValue } from './settings.ts';

/** What a simulation of a plan measured, as far as the attribution needs it. */
export interface PeakMeasure {
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
  /** No out-of-memory error (the peaks of a plan that does not fit are those reached before the error). */
  fits: boolean;
}

/** A plan to simulate: the base with the other's value of `key`. */
export interface AttributionVariant {
  key: SettingKey;
  plan: Plan;
}

/** One setting changed from the base's value to the other's, and what that change alone does. */
export type ChangeEffect =
  | {
      key: SettingKey;
      from: SettingValue;
      to: SettingValue;
      /** Peak reserved of the base with this change alone, less the base's (negative: saves memory). */
      reserved_delta_bytes: number;
      allocated_delta_bytes: number;
      /** The base with this change alone fits. */
      fits: boolean;
    }
  | {
      key: SettingKey;
      from: SettingValue;
      to: SettingValue;
      /**
       * The base with this change alone is not a plan the engine simulates (`not_simulated`: a model whose limits
       * the base's settings exceed), or one whose step PyTorch itself fails (`fails_in_pytorch`: a regression head
       * moved onto bf16 weights; engine/plan/parse.ts `pytorchFailure`).
       */
      reason_id: 'not_simulated' | 'fails_in_pytorch';
      /** The engine's message (English: the app words it), or '' where the change was not simulated on its own. */
      message: string;
    };

export interface Attribution {
  base_peak_reserved_bytes: number;
  other_peak_reserved_bytes: number;
  /** other less base (negative: the other plan saves memory). */
  reserved_difference_bytes: number;
  allocated_difference_bytes: number;
  base_fits: boolean;
  other_fits: boolean;
  /** Each differing setting, the largest effect (either sign) first; not-simulated changes last. */
  changes: ChangeEffect[];
  /** reserved_difference_bytes less the sum of the measured single changes' deltas (0 with a single change). */
  interaction_bytes: number;
}

/**
 * The plans to simulate: the base with each differing setting of the other. With a single difference there is
 * nothing to simulate (that variant is the other plan itself), and none with no difference.
 */
export function attributionVariants(base: Plan, other: Plan): AttributionVariant[] {
  const keys = differingSettings(base, other);
  return keys.length < 2 ? [] : keys.map((key) => ({ key, plan: withSettingOf(base, other, key) }));
}

/** What measuring a variant gave: its peaks, or why it could not be simulated. */
export type VariantOutcome = PeakMeasure | { error: string };

/**
 * Folds the measures into an attribution. `outcomes` has one entry per variant of `attributionVariants` (by key);
 * a key without one reads as not simulated.
 */
export function attributeDifference(base: Plan, other: Plan, measured: { base: PeakMeasure; other: PeakMeasure; outcomes: ReadonlyMap<SettingKey, VariantOutcome> }): Attribution {
  const keys = differingSettings(base, other);
  const reservedDifference = measured.other.peak_reserved_bytes - measured.base.peak_reserved_bytes;
  const allocatedDifference = measured.other.peak_allocated_bytes - measured.base.peak_allocated_bytes;
  const changes: ChangeEffect[] = keys.map((key) => {
    const from = settingOf(base, key).value;
    const to = settingOf(other, key).value;
    // The only difference: the change alone is the other plan.
    const outcome: VariantOutcome | undefined = keys.length === 1 ? measured.other : measured.outcomes.get(key);
    if (outcome === undefined) return { key, from, to, reason_id: 'not_simulated', message: '' };
    if ('error' in outcome) {
      const failure = pytorchFailure(withSettingOf(base, other, key));
      return failure ? { key, from, to, reason_id: 'fails_in_pytorch', message: failure } : { key, from, to, reason_id: 'not_simulated', message: outcome.error };
    }
    return {
      key,
      from,
      to,
      reserved_delta_bytes: outcome.peak_reserved_bytes - measured.base.peak_reserved_bytes,
      allocated_delta_bytes: outcome.peak_allocated_bytes - measured.base.peak_allocated_bytes,
      fits: outcome.fits,
    };
  });
  const size = (c: ChangeEffect) => ('reserved_delta_bytes' in c ? Math.abs(c.reserved_delta_bytes) : -1);
  changes.sort((a, b) => size(b) - size(a));
  const explained = changes.reduce((sum, c) => sum + ('reserved_delta_bytes' in c ? c.reserved_delta_bytes : 0), 0);
  return {
    base_peak_reserved_bytes: measured.base.peak_reserved_bytes,
    other_peak_reserved_bytes: measured.other.peak_reserved_bytes,
    reserved_difference_bytes: reservedDifference,
    allocated_difference_bytes: allocatedDifference,
    base_fits: measured.base.fits,
    other_fits: measured.other.fits,
    changes,
    interaction_bytes: reservedDifference - explained,
  };
}

function measure(plan: Plan, device: DeviceSpec): PeakMeasure {
  const r = simulate(plan, { device, timelinePoints: 0, peakDetails: false });
  return { peak_allocated_bytes: r.peak_allocated_bytes, peak_reserved_bytes: r.peak_reserved_bytes, fits: r.oom === null };
}

/** Everything at once: simulates the base, the other and each single change (`device` resolves each plan's GPU). */
export function attribute(base: Plan, other: Plan, options: { device: (plan: Plan) => DeviceSpec; base?: PeakMeasure; other?: PeakMeasure }): Attribution {
  const outcomes = new Map<SettingKey, VariantOutcome>();
  for (const v of attributionVariants(base, other)) {
    try {
      outcomes.set(v.key, measure(v.plan, options.device(v.plan)));
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      outcomes.set(v.key, { error: error.message });
    }
  }
  return attributeDifference(base, other, {
    base: options.base ?? measure(base, options.device(base)),
    other: options.other ?? measure(other, options.device(other)),
    outcomes,
  });
}
