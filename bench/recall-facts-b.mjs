// @ts-check
// Fact set B of bench/recall-session.mjs: a held-out set written after recall at assembly was
// built, measured on without tuning anything on it (`node bench/recall.mjs --set b`). The same
// shape, kinds and proportions as set A (24 facts: user-stated tickets, host:port and a URL,
// commits, people and roles, numbers with units, dates; 2 preferences, 2 decisions, 2 facts the
// assistant stated, 6 knowledge updates worded differently from each other, a "which came
// first" and an "on the day of" question; 4 abstention questions), in other domains: a mobile
// app team, a data platform and a hardware lab. Its small talk, plant leads and correction
// frames differ from set A's too, so that nothing in how set A is phrased carries over.
// 17 of the 24 questions share no content word (bench/recall-session.mjs `sharedWords`) with
// what planted or changed their fact.

/** @type {import('./recall-session.mjs').Fact[]} */
export const FACTS = [
  { id: 1, kind: 'user fact (ticket)', plants: ['the Android crash when a user denies camera permission is filed as MOB-2291.'], values: ['MOB-2291'], question: 'What was the issue id for the app falling over when people refuse the photo prompt?' },
  {
    id: 2, kind: 'update (host:port)', plants: ['the MQTT broker for the test benches is mqtt-lab-1.bench.local:8883.'], values: ['mqtt-lab-1.bench.local:8883'],
    update: { text: "scratch that broker address; since the rack swap it's lab-mq-7.bench.local:1884.", values: ['lab-mq-7.bench.local:1884'] },
    question: 'Where should the rigs publish their sensor readings these days?',
  },
  { id: 3, kind: 'user fact (commit)', plants: ['the last firmware image that passed the thermal soak was commit 9c41e0ab.'], values: ['9c41e0ab'], question: 'Which firmware revision was the final one to survive the heat test?' },
  {
    id: 4, kind: 'update (person, role)', plants: ['Ines Carvalho is the product owner for the iOS app.'], values: ['Ines Carvalho'],
    update: { text: 'ownership changed hands: Ines is on parental leave, so Rafael Quist owns the iOS app until spring.', values: ['Rafael Quist'] },
    question: 'Who makes the calls on the iPhone roadmap right now?',
  },
  { id: 5, kind: 'user fact (number, unit)', plants: ['the SoC core rail on the sensor board has to sit at 0.85 V, within 3 %.'], values: ['0.85 V'], question: 'What voltage should the SoC supply on the sensor PCB read?' },
  { id: 6, kind: 'preference', plants: ['when you write SQL for me, use lowercase keywords and leading commas.'], values: ['leading commas'], question: 'How do I like my warehouse queries styled?' },
  { id: 7, kind: 'decision', plants: ['we settled on Automerge for resolving conflicts in offline sync.'], values: ['Automerge'], question: 'What did we pick to merge edits made without a connection?' },
  {
    id: 8, kind: 'update (date)', plants: ['the EMC pre-compliance scan at the external lab is booked for 2027-04-06.'], values: ['2027-04-06'],
    update: { text: 'the test house moved our slot: the EMC pre-scan is now on 2027-04-20.', values: ['2027-04-20'] },
    question: 'When do the boards go for their radio-interference check?',
  },
  { id: 9, kind: 'user fact (ticket)', plants: ['finance is tracking our ask for extra warehouse compute credits as FIN-3306.'], values: ['FIN-3306'], question: 'Which ticket is the compute credits request under?' },
  { id: 10, kind: 'user fact (URL)', plants: ['the public TestFlight invite is https://testflight.apple.com/join/Qx7Lm2Rp if anyone asks.'], values: ['testflight.apple.com/join/Qx7Lm2Rp'], question: 'Where do outside testers sign up for the iPhone preview?' },
  {
    id: 11, kind: 'update (number, unit)', plants: ['cold start on a Pixel 6 has to come in under 1.2 s.'], values: ['1.2 s'],
    update: { text: 'new numbers from product: Pixel 6 cold start must now be below 900 ms.', values: ['900 ms'] },
    question: 'How quickly must the Android app launch on the Google handset?',
  },
  {
    id: 12, kind: 'assistant fact (name)', plants: ['could you come up with a codename for the next revision of the sensor board?'], values: ['Marlinspike'],
    says: "How about Marlinspike? It's distinctive, and nothing else in the repo uses it.", question: 'What was the nautical-sounding name you proposed for the new PCB spin?',
  },
  {
    id: 13, kind: 'assistant fact (number, unit)', plants: ["how often should the mobile client poll for new messages when it's on screen?"], values: ['45 s'],
    says: "I'd poll every 45 s in the foreground and rely on push notifications in the background.", question: 'What refresh interval did you recommend for the inbox with the app open?',
  },
  { id: 14, kind: 'user fact (person, role)', plants: ['our contact at the contract manufacturer is Kenji Albrecht, their NPI engineer.'], values: ['Kenji Albrecht'], question: 'Who do we talk to at the factory that builds our boards?' },
  { id: 15, kind: 'preference', plants: ['please always write timestamps as ISO-8601 in UTC, never in my local clock.'], values: ['ISO-8601'], question: 'How should you show me dates and times?' },
  {
    id: 16, kind: 'update (decision)', plants: ['decision: in-app analytics events will go through Segment.'], values: ['Segment'],
    update: { text: 'change of plan on analytics: events now flow to a self-hosted RudderStack.', values: ['RudderStack'] },
    question: 'So which tool ended up carrying usage data out of the apps?',
  },
  { id: 17, kind: 'user fact (date)', plants: ['Google Play wants our new target API level by 2027-08-31.'], values: ['2027-08-31'], question: "What's the deadline for bumping the SDK version on the Android store?" },
  { id: 18, kind: 'user fact (ticket)', plants: ['the intermittent I2C bus lockup on rev C boards is tracked as HW-618.'], values: ['HW-618'], question: 'Which ticket covers the sensor chip communication hang?' },
  {
    id: 19, kind: 'update (number, unit)', plants: ['the raw events table in the warehouse grows by about 42 GB a day.'], values: ['42 GB'],
    update: { text: 'turns out we were double-counting retries: the raw events table really grows by 27 GB a day.', values: ['27 GB'] },
    question: 'How much clickstream data piles up each day now?',
  },
  {
    id: 20, kind: 'temporal (which came first)', plants: ['we just flashed the new bootloader onto all the bench units.', 'we just moved the iOS CI builds over to Xcode 17.'], values: ['bootloader', 'Xcode 17'],
    question: 'Which happened earlier, the Apple toolchain switch or the boot firmware reflash?',
  },
  {
    id: 21, kind: 'temporal (on the day of)', plants: ['this is from the day the lab air conditioning died; for the write-up, the panel lot we had to scrap was PL-4471.'], values: ['PL-4471'],
    question: 'On the day the cooling went out in the workshop, which batch did we end up binning?',
  },
  { id: 22, kind: 'user fact (person, role)', plants: ['Yusuf Brennan must sign off on any schema change in the warehouse.'], values: ['Yusuf Brennan'], question: 'Whose approval do I need before altering table layouts for analytics?' },
  { id: 23, kind: 'user fact (host:port)', plants: ["OpenOCD for the lab's JTAG adapters listens on jtag-gw.lab.internal:3333."], values: ['jtag-gw.lab.internal:3333'], question: 'What address do I give gdb to reach the JTAG gateway?' },
  { id: 24, kind: 'user fact (commit)', plants: ['the fix for the push-token refresh race is commit e51d8b90.'], values: ['e51d8b90'], question: 'Which commit sorted out the notification registration race?' },
]

/** Questions whose answer is nowhere in the history (the third names someone who is in it). */
export const ABSTENTIONS = [
  "What's the Wi-Fi password for the hardware lab?",
  'Which Slack channel do the warehouse alerts post to?',
  'What did Kenji say about the tooling cost for the enclosure?',
  'Did I ever give you our App Store Connect team ID?',
]

/** Turns that ask nothing about the past (the third a follow-up about the previous answer). */
export const CHAT = ['Great, thank you.', 'Alright, keep going.', 'What would you do right after that?', 'Okay, next.', 'Perfect, cheers!']

/** The order plants are made in (fact id, plant index). */
export const PLANT_ORDER = [[9, 0], [14, 0], [2, 0], [6, 0], [20, 0], [17, 0], [11, 0], [1, 0], [12, 0], [22, 0], [4, 0], [18, 0], [7, 0], [3, 0], [16, 0], [21, 0], [13, 0], [8, 0], [24, 0], [20, 1], [10, 0], [19, 0], [5, 0], [15, 0], [23, 0]]
/** The order questions are asked in (not the plants'). */
export const ASK_ORDER = [11, 23, 6, 19, 2, 14, 9, 21, 4, 17, 12, 1, 16, 8, 24, 5, 20, 13, 3, 18, 10, 15, 22, 7]

/** What a plant turn starts with (set A has its own). */
export const LEADS = ['For the record, since it will come up again: ', 'Quick aside you should remember: ', 'Writing this down while I think of it: ']
/** What a change of an earlier fact starts with in a short turn, and after a pasted log's first line. */
export const CORRECTION = 'Going back to something I told you before. '
export const LOG_CORRECTION = 'Before that, '
