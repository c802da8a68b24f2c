// @ts-check
// Fact set C of bench/recall-session.mjs: a second held-out set, written to measure recall's
// semantic bridge (a question asked in other words than the fact was stated in) without tuning
// anything on it (`node bench/recall.mjs --set c`). The same shape, kinds and proportions as sets
// A and B (24 facts: user-stated tickets, host:port and a URL, commits, people and roles, numbers
// with units, dates; 2 preferences, 2 decisions, 2 facts the assistant stated, 6 knowledge
// updates worded differently from each other, a "which came first" and an "on the day of"
// question; 4 abstention questions), in domains neither of them has: a clinic's scheduling
// system, a warehouse robotics team and a game studio. Its small talk, plant leads and
// correction frames differ from sets A and B too.
// 21 of the 24 questions share no content word (bench/recall-session.mjs `sharedWords`) with
// what planted or changed their fact.

/** @type {import('./recall-session.mjs').Fact[]} */
export const FACTS = [
  { id: 1, kind: 'user fact (ticket)', plants: ['the bug where two receptionists can grab the same appointment slot at once is SCHED-5127.'], values: ['SCHED-5127'], question: "What's the issue number for the front desk double-booking problem?" },
  {
    id: 2, kind: 'update (host:port)', plants: ['the fleet manager for the warehouse robots answers on amr-fleet.dc3.lan:9443.'], values: ['amr-fleet.dc3.lan:9443'],
    update: { text: 'forget the old fleet endpoint; after the network cutover it lives at fleetctl-2.dc3.lan:7443.', values: ['fleetctl-2.dc3.lan:7443'] },
    question: 'Which address do the pick bots get their missions from at the moment?',
  },
  { id: 3, kind: 'user fact (commit)', plants: ["the last build that didn't desync in the 64-player soak was commit 4d7b2f19."], values: ['4d7b2f19'], question: 'Which revision was the final clean one in the big multiplayer stress run?' },
  {
    id: 4, kind: 'update (person, role)', plants: ['the clinical lead who signs off on scheduling rules is Dr. Halima Oyelaran.'], values: ['Halima Oyelaran'],
    update: { text: 'Halima has moved to run the Eastside site, so Dr. Anders Lindqvist approves booking-rule changes from here on.', values: ['Anders Lindqvist'] },
    question: 'Which physician has the final say on how appointments may be set up, as of today?',
  },
  { id: 5, kind: 'user fact (number, unit)', plants: ['the lift arm on the tote robots is rated for a 38 kg payload, no more.'], values: ['38 kg'], question: 'How heavy a bin can the carrier bots safely pick up?' },
  { id: 6, kind: 'preference', plants: ['when you write C# for our Unity scripts, please use Allman-style braces and tabs.'], values: ['Allman'], question: 'What layout do I want for curly brackets in gameplay code?' },
  { id: 7, kind: 'decision', plants: ['after the bake-off we chose Camunda to drive the referral approval workflow.'], values: ['Camunda'], question: 'What engine did we pick to run the steps when a GP sends a patient over?' },
  {
    id: 8, kind: 'update (date)', plants: ['our console certification submission window opens on 2027-05-11.'], values: ['2027-05-11'],
    update: { text: 'the platform holder reshuffled its queue, so our cert submission slides to 2027-06-01.', values: ['2027-06-01'] },
    question: 'When does the build go off to Sony and Microsoft for approval?',
  },
  { id: 9, kind: 'user fact (ticket)', plants: ['procurement is tracking our order for six spare lidar units as PROC-8821.'], values: ['PROC-8821'], question: 'Under what reference did purchasing put the replacement laser scanners?' },
  { id: 10, kind: 'user fact (URL)', plants: ['the patient self-booking page is https://book.northpier-clinic.example/p/7HqT2 if anyone needs it.'], values: ['book.northpier-clinic.example/p/7HqT2'], question: 'Where do people go online to make their own appointment?' },
  {
    id: 11, kind: 'update (number, unit)', plants: ['the server tick rate for ranked matches is 30 Hz.'], values: ['30 Hz'],
    update: { text: 'the netcode folks raised ranked servers to 60 Hz after the playtest.', values: ['60 Hz'] },
    question: 'How many simulation updates per second do competitive games run at?',
  },
  {
    id: 12, kind: 'assistant fact (name)', plants: ['can you think of a name for the charging-dock firmware branch?'], values: ['Betelgeuse'],
    says: "Maybe Betelgeuse? Easy to spot in a branch list, and it's not used anywhere yet.", question: 'Which star did you suggest naming the recharge station code after?',
  },
  {
    id: 13, kind: 'assistant fact (number, unit)', plants: ['how far ahead should the clinic send SMS reminders before an appointment?'], values: ['36 h'],
    says: "I'd text patients 36 h before the visit, and again on the morning itself for early slots.", question: 'How long in advance did you recommend pinging people about their bookings?',
  },
  { id: 14, kind: 'user fact (person, role)', plants: ['our field engineer at the robot vendor is Siobhan Marchetti.'], values: ['Siobhan Marchetti'], question: 'Who should I call at the AMR supplier when something breaks on site?' },
  { id: 15, kind: 'preference', plants: ['please keep your answers in British English spelling.'], values: ['British English'], question: 'Which variety of the language did I ask you to write in?' },
  {
    id: 16, kind: 'update (decision)', plants: ['decision: crash reports from the game client will go to Sentry.'], values: ['Sentry'],
    update: { text: "crash uploads from the client go to Backtrace now; we're off the old setup.", values: ['Backtrace'] },
    question: "So which service collects it when the game falls over on a player's machine?",
  },
  { id: 17, kind: 'user fact (date)', plants: ["the switch-over to the new EHR vendor's booking API is planned for 2027-09-14."], values: ['2027-09-14'], question: "When are we cutting over to the other health-records system's scheduling interface?" },
  { id: 18, kind: 'user fact (ticket)', plants: ['the audio dropping out on the Switch port after suspend and resume is logged as GAME-1436.'], values: ['GAME-1436'], question: 'Which ticket has the sound cutting out on Nintendo after waking from sleep?' },
  {
    id: 19, kind: 'update (number, unit)', plants: ['a full charge on the AMRs lasts about 9.5 h of driving.'], values: ['9.5 h'],
    update: { text: "the battery vendor's figure was optimistic: one charge really gives 7.2 h on the floor.", values: ['7.2 h'] },
    question: 'How long can a robot run before it has to go back to the charger?',
  },
  {
    id: 20, kind: 'temporal (which came first)', plants: ['we just rolled out the wave-picking planner to every aisle.', 'we just locked the art assets for the winter season event.'], values: ['wave-picking planner', 'winter season event'],
    question: 'Which came earlier: freezing the holiday visuals or shipping the batch-picking scheduler?',
  },
  {
    id: 21, kind: 'temporal (on the day of)', plants: ['this is from the day the phone lines at the clinic went down; for the incident note, the reminder batch that never went out was RMD-0930.'], values: ['RMD-0930'],
    question: "On the day patients couldn't ring the surgery, which set of text alerts got stuck?",
  },
  { id: 22, kind: 'user fact (person, role)', plants: ['Tobias Ferreira-Kahn has to approve anything that touches the save-game format.'], values: ['Tobias Ferreira-Kahn'], question: 'Who needs to okay changes to how player progress is stored on disk?' },
  { id: 23, kind: 'user fact (host:port)', plants: ['the HL7 interface engine takes inbound lab results on hl7-in.northpier.int:2575.'], values: ['hl7-in.northpier.int:2575'], question: 'Which endpoint should the pathology feed connect to?' },
  { id: 24, kind: 'user fact (commit)', plants: ['the fix for robots stalling at the conveyor handoff is commit a03c6e5d.'], values: ['a03c6e5d'], question: 'Which change cured the bots freezing where they pass totes to the belt?' },
]

/** Questions whose answer is nowhere in the history (the third names someone who is in it). */
export const ABSTENTIONS = [
  "What's the door code for the room where the robots charge?",
  'Who is on the overnight pager rotation for the booking system?',
  'What did Siobhan say about the warranty on the lidar units?',
  'Did I ever give you our Steamworks app ID?',
]

/** Turns that ask nothing about the past (the third a follow-up about the previous answer). */
export const CHAT = ['Nice one, thanks.', 'Fine, carry on.', 'Then what comes after that step?', 'Got it, moving on.', 'Brilliant, much appreciated!']

/** The order plants are made in (fact id, plant index). */
export const PLANT_ORDER = [[5, 0], [23, 0], [16, 0], [1, 0], [12, 0], [8, 0], [20, 0], [14, 0], [4, 0], [10, 0], [24, 0], [6, 0], [19, 0], [21, 0], [3, 0], [15, 0], [2, 0], [18, 0], [20, 1], [13, 0], [9, 0], [11, 0], [22, 0], [7, 0], [17, 0]]
/** The order questions are asked in (not the plants'). */
export const ASK_ORDER = [19, 7, 13, 1, 22, 16, 10, 3, 20, 5, 15, 8, 24, 12, 2, 18, 9, 4, 21, 14, 6, 23, 11, 17]

/** What a plant turn starts with (sets A and B have their own). */
export const LEADS = ['Something to hang on to for later: ', 'Noting this here so we have it: ', 'One detail worth filing away: ']
/** What a change of an earlier fact starts with in a short turn, and after a pasted log's first line. */
export const CORRECTION = 'An earlier detail has changed since I mentioned it. '
export const LOG_CORRECTION = 'Separate thing that changed: '
