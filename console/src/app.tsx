import { useEffect, useState } from 'preact/hooks';
import { fetchMe, type Me } from './me';
import { CatalogPage } from './pages/catalog-page';
import { JobPage } from './pages/job-page';
import { JobsPage } from './pages/jobs-page';
import { SandboxPage } from './pages/sandbox-page';
import { SandboxesPage } from './pages/sandboxes-page';
import { SignIn } from './pages/sign-in';
import { href, useRoute } from './router';
import { forgetKey, storedKey } from './session';

/** The signed-in frame: navigation, who is signed in, and the page the hash names. */
export function App() {
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const route = useRoute();

  useEffect(() => {
    if (!storedKey()) {
      setMe(null);
      return;
    }
    fetchMe()
      .then(setMe)
      .catch(() => {
        forgetKey();
        setMe(null);
      });
  }, []);

  if (me === undefined) return <p class="loading">Loading…</p>;
  if (me === null) return <SignIn onSignedIn={setMe} />;

  const [section = 'jobs', id] = route;
  const signOut = () => {
    forgetKey();
    setMe(null);
    location.hash = '';
  };
  const nav = (name: string, label: string) => (
    <a href={href(name)} aria-current={section === name ? 'page' : undefined}>
      {label}
    </a>
  );
  return (
    <>
      <header class="top">
        <span class="brand">Sandstream</span>
        <nav aria-label="Sections">
          {nav('jobs', 'Jobs')}
          {nav('sandboxes', 'Sandboxes')}
          {nav('catalog', 'Pools, templates & queues')}
        </nav>
        <span class="who">
          tenant <strong>{me.tenant}</strong>
          {me.admin ? ' (admin: every tenant)' : ''}
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>{page(section, id, me)}</main>
    </>
  );
}

function page(section: string, id: string | undefined, me: Me) {
  if (section === 'jobs' && id) return <JobPage id={id} />;
  if (section === 'jobs') return <JobsPage me={me} />;
  if (section === 'sandboxes' && id) return <SandboxPage id={id} />;
  if (section === 'sandboxes') return <SandboxesPage me={me} />;
  if (section === 'catalog') return <CatalogPage me={me} />;
  return (
    <p>
      No such page. <a href={href('jobs')}>Jobs</a>
    </p>
  );
}
